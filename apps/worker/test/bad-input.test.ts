import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCli } from './run-cli.ts';
import { tempDir } from './temp-dir.ts';

const dir = tempDir('berth-bad-input-');
function file(name: string, text: string): string {
  const p = path.join(dir, name);
  writeFileSync(p, text);
  return p;
}
const good = file('good.yml', 'version: "1"\nsecrets:\n  - name: token\nsteps:\n  - name: a\n    image: berth/busybox:1.35\n    commands: [echo a]\n');
const staged = file(
  'staged.yml',
  'version: "1"\nstages:\n  one:\n    steps:\n      - name: a\n        image: berth/busybox:1.35\n        commands: [echo a]\n',
);
const noStages = file('plain.yml', 'version: "1"\nsteps:\n  - name: a\n    image: berth/busybox:1.35\n    commands: [echo a]\n');

interface Case {
  name: string;
  args: () => string[];
  env?: NodeJS.ProcessEnv;
  code: number;
  /** Every one of these must be in stderr. */
  says: (string | RegExp)[];
}

const pipelineCases: [string, string, (string | RegExp)[]][] = [
  ['malformed YAML', 'version: "1"\nsteps:\n  - name: a\n    image: [unclosed\n', [/malformed\.yml:\d+:\d+/]],
  ['an unknown key, with a hint', 'version: "1"\nsteps:\n  - name: a\n    image: berth/busybox:1.35\n    comands: [echo]\n', [/:5:5:/, /commands/]],
  ['a bad image reference', 'version: "1"\nsteps:\n  - name: a\n    image: "UPPER/Case::bad"\n    commands: [echo]\n', [/:4:\d+:/, /image/i]],
  [
    'duplicate step names',
    'version: "1"\nsteps:\n  - name: a\n    image: berth/busybox:1.35\n    commands: [echo]\n  - name: a\n    image: berth/busybox:1.35\n    commands: [echo]\n',
    [/:6:\d+:/, /a/],
  ],
  [
    'an unknown need',
    'version: "1"\nstages:\n  one:\n    needs: [nope]\n    steps:\n      - name: a\n        image: berth/busybox:1.35\n        commands: [echo]\n',
    [/nope/],
  ],
  [
    'cyclic stages',
    'version: "1"\nstages:\n  one:\n    needs: [two]\n    steps:\n      - name: a\n        image: berth/busybox:1.35\n        commands: [echo]\n  two:\n    needs: [one]\n    steps:\n      - name: b\n        image: berth/busybox:1.35\n        commands: [echo]\n',
    [/cycl/i],
  ],
  ['a step without an image', 'version: "1"\nsteps:\n  - name: a\n    commands: [echo]\n', [/image/]],
  ['a bad pull value', 'version: "1"\nsteps:\n  - name: a\n    image: berth/busybox:1.35\n    pull: sometimes\n    commands: [echo]\n', [/:5:\d+:/, /pull/]],
  [
    'steps and stages together',
    'version: "1"\nsteps:\n  - name: a\n    image: berth/busybox:1.35\n    commands: [echo]\nstages:\n  one:\n    steps:\n      - name: b\n        image: berth/busybox:1.35\n        commands: [echo]\n',
    [/stages/],
  ],
  // Vela refuses only an empty version and "legacy" (go-vela/server internal/yaml.go ParseYAML).
  ['the legacy version', 'version: legacy\nsteps:\n  - name: a\n    image: berth/busybox:1.35\n    commands: [echo]\n', [/version/]],
  [
    'templates',
    'version: "1"\ntemplates:\n  - name: t\n    source: github.com/o/r/t.yml\n    type: github\nsteps:\n  - name: a\n    template:\n      name: t\n',
    [/template t comes from github\.com\/o\/r\/t\.yml/, /--template-file t:/],
  ],
  [
    'a Go template without --pipeline-type go',
    'version: "1"\nsteps:\n{{ range $n := list "a" "b" }}\n  - name: {{ $n }}\n    image: berth/busybox:1.35\n    commands: [echo]\n{{ end }}\n',
    [/:3:1: the file looks like a Go template/, /--pipeline-type go/],
  ],
  ['an empty file', '', [/empty\.yml/]],
  ['a list at the top', '- a\n- b\n', [/top-?level\.yml:1:1/]],
  ['a step that is not a mapping', 'version: "1"\nsteps:\n  - just a string\n', [/:3:\d+:/]],
  [
    'an environment that is neither map nor list',
    'version: "1"\nsteps:\n  - name: a\n    image: berth/busybox:1.35\n    environment: 42\n    commands: [echo]\n',
    [/:5:\d+:/, /environment/],
  ],
];

const names: Record<string, string> = { 'an empty file': 'empty.yml', 'a list at the top': 'top-level.yml', 'malformed YAML': 'malformed.yml' };

const cases: Case[] = [
  ...pipelineCases.map(([name, text, says]): Case => {
    const p = file(names[name] ?? `${name.replace(/\W+/g, '-')}.yml`, text);
    return { name: `validate: ${name}`, args: () => ['validate', p], code: 1, says: [...says, /problems? in /] };
  }),
  { name: 'an unknown command', args: () => ['frobnicate'], code: 2, says: [/unknown command 'frobnicate'/] },
  {
    name: 'a --template-file without a path',
    args: () => ['validate', '--template-file', 'nopath', good],
    code: 2,
    says: [/--template-file "nopath" is not NAME:PATH/],
  },
  { name: 'an unknown flag', args: () => ['exec', '--nope', good], code: 2, says: [/unknown option '--nope'/] },
  {
    name: 'an unknown runtime',
    args: () => ['exec', '--runtime', 'podman', good],
    code: 2,
    says: [
      /--runtime podman: not a built-in runtime \(docker, kubernetes, host\), and no installed package of that name was found/,
      /give a path to its module/,
    ],
  },
  {
    name: 'a timeout that is not a duration',
    args: () => ['exec', '--timeout', 'soon', good],
    code: 2,
    says: [/build\.timeout \(flag --build-timeout\): must be a Go duration like 30m, 15s or 1h30m, got "soon"/],
  },
  { name: 'a zero timeout', args: () => ['exec', '--timeout', '0s', good], code: 2, says: [/build\.timeout \(flag --build-timeout\): must be longer than 0/] },
  { name: 'an --env without =', args: () => ['exec', '--env', 'NOVALUE', good], code: 2, says: [/--env "NOVALUE" is not NAME=VALUE/] },
  { name: 'a --secret without a name', args: () => ['exec', '--secret', '=x', good], code: 2, says: [/--secret "=x" is not NAME=VALUE/] },
  {
    name: 'a missing secrets file',
    args: () => ['exec', '--secrets-file', path.join(dir, 'nope.env'), good],
    code: 2,
    says: [/cannot read the secrets file .*nope\.env: no such file/],
  },
  {
    name: 'a secrets file with a bad line',
    args: () => ['exec', '--secrets-file', file('bad.env', 'ok=1\njust words\n'), good],
    code: 2,
    says: [/bad\.env:2: expected name=value/],
  },
  {
    name: 'several bad flags at once, all listed',
    args: () => ['exec', '--env', 'X', '--timeout', 'later', good],
    code: 2,
    says: [/--env "X"/, /build\.timeout \(flag --build-timeout\): .*got "later"/],
  },
  {
    name: 'a bad --log-level',
    args: () => ['exec', '--log-level', 'loud', good],
    code: 2,
    says: [/log\.level \(flag --log-level\): must be one of .*got "loud"/],
  },
  {
    name: 'a namespace Kubernetes would refuse',
    args: () => ['exec', '--runtime', 'kubernetes', '--namespace', 'Not_OK', good],
    code: 2,
    says: [/runtime\.namespace \(flag --runtime-namespace\): a Kubernetes namespace name .*got "Not_OK"/],
  },
  {
    name: 'a bad BERTH_TIMEOUT in the environment',
    args: () => ['exec', good],
    env: { BERTH_TIMEOUT: 'whenever' },
    code: 2,
    says: [/build\.timeout \(env BERTH_TIMEOUT\): must be a Go duration .*got "whenever"/],
  },
  {
    name: 'a build number that is not a number',
    args: () => ['exec', '--build-number', 'next', good],
    code: 2,
    says: [/build-number \(flag --build-number\): must be a whole number, got "next"/],
  },
  {
    name: 'a bad BERTH_BUILD_NUMBER in the environment',
    args: () => ['exec', good],
    env: { BERTH_BUILD_NUMBER: '0' },
    code: 2,
    says: [/build-number \(env BERTH_BUILD_NUMBER\): must be at least 1/],
  },
  { name: 'a missing pipeline file', args: () => ['exec', path.join(dir, 'missing.yml')], code: 2, says: [/no pipeline file at .*missing\.yml/] },
  { name: 'a pipeline path that is a directory', args: () => ['validate', dir], code: 2, says: [/is a directory/] },
  { name: 'no .vela.yml in the current directory', args: () => ['validate'], code: 2, says: [/no pipeline file at \.vela\.yml/, /name a pipeline file/] },
  { name: 'a declared secret without a value', args: () => ['exec', good], code: 1, says: [/token/] },
  { name: 'an unknown --step', args: () => ['exec', '--secret', 'token=x', '--step', 'zzz', good], code: 2, says: [/--step zzz: no such step \(steps: a\)/] },
  { name: 'a --stage on a pipeline without stages', args: () => ['exec', '--stage', 'one', noStages], code: 2, says: [/the pipeline has no stages/] },
  { name: 'an unknown --stage', args: () => ['exec', '--stage', 'two', staged], code: 2, says: [/--stage two: no such stage \(stages: one\)/] },
  { name: 'compile of a broken file', args: () => ['compile', path.join(dir, 'duplicate-step-names.yml')], code: 1, says: [/duplicate-step-names\.yml:6:/] },
];

describe('berth on bad input: a clear message, the documented exit status, never a stack trace', () => {
  it('has at least 25 cases', () => {
    expect(cases.length).toBeGreaterThanOrEqual(25);
  });

  it.each(cases)('$name → exit $code', async ({ args, code, says, env }) => {
    const cwd = path.join(dir, 'empty-cwd');
    mkdirSync(cwd, { recursive: true });
    const run = await runCli(args(), { cwd, env });
    expect(run.stderr).not.toMatch(/^\s+at .+:\d+:\d+\)?$/m);
    for (const s of says) expect(run.stderr).toMatch(s);
    expect(run.code).toBe(code);
  });
});

describe('berth on good input', () => {
  it('validate says the file is valid and exits 0', async () => {
    const run = await runCli(['validate', good]);
    expect(run.stdout).toContain('is valid: 2 steps, 0 services');
    expect(run.code).toBe(0);
  });

  // go-vela/server compiles a pipeline without steps to the init step and skips the build
  // (compiler/native/compile.go compileSteps; api/build/skip.go SkipEmptyBuild).
  it('validate and compile say a file without steps has nothing to run, and exit 0', async () => {
    const empty = file('empty-steps.yml', 'version: "1"\nsteps: []\n');
    const validate = await runCli(['validate', empty]);
    expect(validate.code).toBe(0);
    expect(validate.stdout).toContain(
      "is valid, but has nothing to run: Vela's server would skip the build (skipping build since only init step found — it is likely no rulesets matched for the webhook payload)",
    );
    const compile = await runCli(['compile', empty]);
    expect(compile.code).toBe(0);
    expect(compile.stderr).toMatch(/warning: .*empty-steps\.yml:2:1: nothing to run: skipping build since only init step found/);
    expect((JSON.parse(compile.stdout) as { steps: { name: string }[] }).steps.map((s) => s.name)).toEqual(['init']);
  });

  it('compile prints the executable as JSON with prepared ids', async () => {
    const run = await runCli(['compile', good]);
    expect(run.code).toBe(0);
    const build = JSON.parse(run.stdout) as { id: string; steps: { id: string; name: string }[] };
    expect(build.id).toBe('localOrg_localRepo_1');
    expect(build.steps.map((s) => s.name)).toEqual(['init', 'a']);
  });

  it('--help lists the commands and the exit statuses', async () => {
    const run = await runCli(['--help']);
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/exec \[options\] \[file\]/);
    expect(run.stdout).toMatch(/Exit status: 0 the build succeeded/);
  });
});
