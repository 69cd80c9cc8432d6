import { emptyContainer } from '@berth/pipeline';
import { describe, expect, it } from 'vitest';
import { injectSecrets, type LoadedSecret, substituteContainer, toLoadedSecret } from './secrets.ts';

const container = () =>
  emptyContainer({
    name: 'publish',
    image: 'registry/plugin:${TAG}',
    environment: { TAG: '1.2', PARAMETER_PASSWORD: '${PASSWORD}', PARAMETER_LIST: 'a,${MISSING},b', 'KEY_${TAG}': 'kept' },
    entrypoint: ['/bin/${TAG}'],
    secrets: [
      { source: 'password', target: 'PASSWORD' },
      { source: 'deploy-key', target: 'DEPLOY_KEY' },
      { source: 'not-loaded', target: 'NOPE' },
    ],
  });

describe('substituteContainer', () => {
  it('replaces ${NAME} in every string field from the environment, unknown names with nothing, keeping map keys', () => {
    const c = container();
    c.environment['PASSWORD'] = 's3cret';
    substituteContainer(c);
    expect(c.image).toBe('registry/plugin:1.2');
    expect(c.entrypoint).toEqual(['/bin/1.2']);
    expect(c.environment).toMatchObject({ PARAMETER_PASSWORD: 's3cret', PARAMETER_LIST: 'a,,b', 'KEY_${TAG}': 'kept' });
  });

  it('keeps $$ as an escaped $ and leaves $NAME (no braces) for the shell', () => {
    const c = emptyContainer({ name: 'x', image: 'i', environment: { A: 'v', B: '$${A} $A ${A}', C: 'a$$b' } });
    substituteContainer(c);
    expect(c.environment['B']).toBe('${A} $A v');
    expect(c.environment['C']).toBe('a$b');
  });

  it('names the field, never its value, when a field cannot be substituted', () => {
    const c = emptyContainer({ name: 'x', image: 'i', environment: { TOKEN: 'abc${oops-no-brace-value' } });
    expect(() => substituteContainer(c)).toThrow(/unable to substitute environment\.TOKEN of x: a "\$\{" without a closing "\}"/);
    try {
      substituteContainer(c);
    } catch (error) {
      expect((error as Error).message).not.toContain('oops-no-brace-value');
      // A cause would carry the value (the parser quotes its input).
      expect((error as Error).cause).toBeUndefined();
    }
  });
});

describe('injectSecrets', () => {
  const secrets = new Map<string, LoadedSecret>([
    ['password', { value: 'pw', substitution: true }],
    [
      'deploy-key',
      {
        value: 'key',
        substitution: false,
        deniedFor: (c) => (c.image.startsWith('registry/plugin') ? undefined : `restricted to the images registry/plugin, not ${c.image}`),
      },
    ],
  ]);

  it('sets substitutable and protected secrets in separate passes; unloaded ones are left alone', () => {
    const c = container();
    expect(injectSecrets(c, secrets, 'substitutable')).toEqual([]);
    expect(c.environment['PASSWORD']).toBe('pw');
    expect(c.environment['DEPLOY_KEY']).toBeUndefined();
    expect(injectSecrets(c, secrets, 'protected')).toEqual([]);
    expect(c.environment['DEPLOY_KEY']).toBe('key');
    expect(c.environment['NOPE']).toBeUndefined();
  });

  it('withholds a secret the container may not have, saying why without the value', () => {
    const c = container();
    c.image = 'alpine:3';
    const notes = injectSecrets(c, secrets, 'all');
    expect(notes).toEqual(['secret <deploy-key> was not set as DEPLOY_KEY: restricted to the images registry/plugin, not alpine:3']);
    expect(c.environment['DEPLOY_KEY']).toBeUndefined();
    expect(c.environment['PASSWORD']).toBe('pw');
  });

  it('a plain string from a loader is allowed everywhere and substitutable', () => {
    expect(toLoadedSecret('v')).toEqual({ value: 'v' });
    const c = container();
    injectSecrets(c, new Map([['password', toLoadedSecret('v')]]), 'substitutable');
    expect(c.environment['PASSWORD']).toBe('v');
  });
});
