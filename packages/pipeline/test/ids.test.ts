import { randomBytes, randomInt } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { emptyBuild, emptyContainer, prepareBuild, sanitizeContainerId, sanitizeKubernetesName } from '../src/index.ts';
import { isDnsLabel, sanitizeBuildId } from '../src/ids.ts';

describe('prepareBuild', () => {
  it('sets ids as Vela does', () => {
    const build = emptyBuild({
      steps: [emptyContainer({ name: 'test', environment: { VELA_WORKSPACE: '/vela/src/github.com/octo/hello' } })],
      services: [emptyContainer({ name: 'db' })],
      secrets: [{ name: 'x', value: '', key: '', engine: '', type: '', pull: '', origin: emptyContainer({ name: 'vault' }) }],
    });
    prepareBuild(build, { org: 'octo', repo: 'hello', number: 5 });
    expect(build.id).toBe('octo_hello_5');
    expect(build.steps[0]).toMatchObject({ id: 'step_octo_hello_5_test', directory: '/vela/src/github.com/octo/hello' });
    expect(build.services[0]).toMatchObject({ id: 'service_octo_hello_5_db', directory: '' });
    expect(build.secrets[0]?.origin?.id).toBe('secret_octo_hello_5_vault');
  });

  it('names stage steps without a prefix', () => {
    const build = emptyBuild({ stages: [{ name: 'build', needs: [], independent: false, environment: {}, steps: [emptyContainer({ name: 'compile' })] }] });
    prepareBuild(build, { org: '', repo: '', number: 0, local: true });
    expect(build.id).toBe('localOrg_localRepo_1');
    expect(build.stages[0]?.steps[0]?.id).toBe('localOrg_localRepo_1_build_compile');
  });
});

describe('sanitize', () => {
  it('docker replaces spaces and slashes', () => {
    expect(sanitizeContainerId('step_octo_hello_1_my step/x', 'docker')).toBe('step_octo_hello_1_my-step-x');
    expect(sanitizeBuildId('octo_hello world_1', 'docker')).toBe('octo_hello-world_1');
  });

  it('keeps valid DNS labels unchanged', () => {
    expect(sanitizeKubernetesName('step-octo-hello-1-test')).toBe('step-octo-hello-1-test');
  });

  it('maps Vela ids to DNS labels with a stable hash', () => {
    const name = sanitizeKubernetesName('step_Octo_hello.world_1_Run Tests');
    expect(name).toMatch(/^step-octo-hello-world-1-run-tests-[a-z2-7]{10}$/);
    expect(sanitizeKubernetesName('step_Octo_hello.world_1_Run Tests')).toBe(name);
    expect(isDnsLabel(name)).toBe(true);
    const long = sanitizeKubernetesName(`step_octo_hello_1_${'x'.repeat(100)}`);
    expect(long.length).toBeLessThanOrEqual(63);
    expect(isDnsLabel(long)).toBe(true);
    expect(isDnsLabel(sanitizeKubernetesName('___'))).toBe(true);
    expect(isDnsLabel(sanitizeKubernetesName('-x-'))).toBe(true);
  });

  it('never maps two different ids to the same name (50k random ids)', () => {
    const alphabet = 'abcXYZ019_-. /';
    const seen = new Map<string, string>();
    const ids = new Set<string>();
    // Near-duplicates on purpose: ids that differ only in case, separators or past character 63.
    const prefix = `step_octo_hello_1_${'a'.repeat(50)}`;
    for (let i = 0; i < 50_000; i++) {
      const kind = i % 3;
      let id: string;
      if (kind === 0) id = Array.from({ length: randomInt(1, 12) }, () => alphabet[randomInt(alphabet.length)]).join('');
      else if (kind === 1) id = `${prefix}${randomBytes(3).toString('hex')}`;
      else id = `step_${['Octo', 'octo', 'OCTO'][randomInt(3)]}${['_', '.', '-', ' '][randomInt(4)]}${randomInt(1000)}`;
      ids.add(id);
    }
    for (const id of ids) {
      const name = sanitizeKubernetesName(id);
      expect(isDnsLabel(name), `${id} -> ${name}`).toBe(true);
      const other = seen.get(name);
      if (other !== undefined && other !== id) throw new Error(`collision: ${other} and ${id} -> ${name}`);
      seen.set(name, id);
    }
    expect(seen.size).toBe(ids.size);
  });
});
