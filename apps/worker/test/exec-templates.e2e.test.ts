// End to end: templates and eval rulesets in `berth exec` on the real Docker engine.
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { type ProcessRun, spawnBerth } from './run-cli.ts';
import { tempDir } from './temp-dir.ts';

const IMAGE = process.env.BERTH_BUSYBOX_IMAGE ?? 'berth/busybox:1.35';

function berth(args: string[], cwd: string): Promise<ProcessRun> {
  return spawnBerth(args, cwd);
}

describe('berth exec with templates and eval rulesets', { timeout: 120_000 }, () => {
  it('expands a type: file template with vars and drops the steps whose eval is false for the event', async () => {
    const dir = tempDir('berth-e2e-tmpl-');
    mkdirSync(path.join(dir, 'templates'));
    writeFileSync(
      path.join(dir, 'templates', 'greet.yml'),
      `steps:\n{{ range .names }}\n  - name: hi_{{ . }}\n    image: ${IMAGE}\n    pull: never\n    commands: [echo "template says hi to {{ . }}"]\n{{ end }}\n`,
    );
    writeFileSync(
      path.join(dir, '.vela.yml'),
      [
        'version: "1"',
        'templates:',
        '  - name: greet',
        '    source: templates/greet.yml',
        '    type: file',
        'steps:',
        '  - name: greet',
        '    template:',
        '      name: greet',
        '      vars: { names: [ann, bob] }',
        '  - name: on push',
        `    image: ${IMAGE}`,
        '    pull: never',
        '    ruleset:',
        '      eval: VELA_BUILD_EVENT == "push" && VELA_BUILD_BRANCH startsWith "ma"',
        '    commands: [echo "eval let me run"]',
        '  - name: on tag',
        `    image: ${IMAGE}`,
        '    pull: never',
        '    ruleset:',
        '      eval: VELA_BUILD_EVENT == "tag"',
        '    commands: [echo "eval should have dropped me"]',
        '',
      ].join('\n'),
    );
    const run = await berth(['exec', '--event', 'push', '--branch', 'main'], dir);
    expect(run.stderr).toBe('');
    expect(run.stdout).toMatch(/greet_hi_ann +│ template says hi to ann/);
    expect(run.stdout).toMatch(/greet_hi_bob +│ template says hi to bob/);
    expect(run.stdout).toMatch(/on push +│ eval let me run/);
    expect(run.stdout).not.toContain('eval should have dropped me');
    expect(run.code).toBe(0);
  });
});
