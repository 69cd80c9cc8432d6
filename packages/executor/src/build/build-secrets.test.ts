import { background } from '@berth/context';
import { emptyContainer, type Secret } from '@berth/pipeline';
import { describe, expect, it } from 'vitest';
import { BuildSecrets } from './build-secrets.ts';

const secret = (name: string, value: string): Secret => ({ name, value, key: '', engine: 'native', type: 'repo', origin: null, pull: 'build_start' });

describe('BuildSecrets', () => {
  it('loads through the loader, tells of each value, and masks secrets, masked outputs and credentials', async () => {
    const told: string[] = [];
    const outputs = ['output-value'];
    const secrets = new BuildSecrets({
      loader: (_ctx, s) => Promise.resolve(s.name === 'cert' ? 'line-one\nline-two\n' : { value: `loaded-${s.value}`, substitution: false }),
      maskedOutputs: () => outputs,
      onLoaded: (value) => told.push(value),
    });
    await secrets.load(background(), secret('cert', 'ignored'));
    await secrets.load(background(), secret('token', 'abc'));
    expect(told).toEqual(['line-one\nline-two\n', 'loaded-abc']);
    expect(secrets.loaded.get('token')).toEqual({ value: 'loaded-abc', substitution: false });
    const clone = emptyContainer({ name: 'clone', environment: { VELA_NETRC_PASSWORD: 'netrc-pass' } });
    expect(secrets.valuesFor(clone)).toEqual(['line-one\nline-two\n', 'loaded-abc', 'output-value', 'netrc-pass']);
    expect(secrets.mask('cert line-one line-two, loaded-abc, output-value, netrc-pass', [clone])).toBe('cert ***, ***, ***, ***');
  });

  it("takes a secret's own value without a loader", async () => {
    const secrets = new BuildSecrets({ maskedOutputs: () => [], onLoaded: () => undefined });
    await secrets.load(background(), secret('plain', 'p4ss'));
    expect(secrets.values()).toEqual(['p4ss']);
  });
});
