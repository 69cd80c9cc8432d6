// Plugin loading (`--runtime <name|package|path>`, `--runtime-option`, `berth runtimes`), with
// fixture plugins outside Berth's packages (test/fixtures/plugins), and `berth exec --runtime host` end to end.
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadRuntime } from '../src/plugins/load.ts';
import { type ProcessRun, runCli, spawnBerth } from './run-cli.ts';
import { tempDir } from './temp-dir.ts';

const FIXTURES = path.join(import.meta.dirname, 'fixtures/plugins');
const HELLO = path.join(import.meta.dirname, '../../../examples/hello.yml');

describe('loadRuntime', () => {
  it('loads a plugin from a path outside the packages, calling its factory with the --runtime-option pairs', async () => {
    const loaded = await loadRuntime('./shell-plugin.mjs', { cwd: FIXTURES, options: { greeting: 'hi' } });
    expect(loaded).toMatchObject({ source: 'path', location: path.join(FIXTURES, 'shell-plugin.mjs') });
    expect(loaded.descriptor).toMatchObject({ name: 'fixture-shell', version: '0.3.1', contract: '1.0.0' });
  });

  it('takes the one named export that is a descriptor when there is no default or runtime export', async () => {
    const loaded = await loadRuntime('./named-export.mjs', { cwd: FIXTURES });
    expect(loaded.descriptor).toMatchObject({ name: 'named-shell', version: '0.2.0' });
  });

  it('takes the one named export that is a function as the factory, handing it the options', async () => {
    const loaded = await loadRuntime('./strict-options.mjs', { cwd: FIXTURES, options: { replicas: '3' } });
    expect(loaded.descriptor.name).toBe('strict');
  });

  it('says where it looked for a package it cannot find', async () => {
    const error = (await loadRuntime('berth-runtime-nowhere', { cwd: FIXTURES }).catch((e: unknown) => e)) as Error;
    expect(error.message).toContain(`looked in ${path.resolve(FIXTURES, '../../../node_modules')}`);
    expect(error.message).toMatch(/or beside Berth \(npm install -g <package>\)/);
  });

  it('declares the capabilities of the built-in Docker runtime, which binds a host folder and starts steps held', async () => {
    const loaded = await loadRuntime('docker', { cwd: FIXTURES });
    expect(loaded.descriptor.capabilities).toEqual(['outputs', 'hostWorkspace', 'heldStart']);
  });

  it('loads the built-ins by name, typing their options', async () => {
    const loaded = await loadRuntime('host', { cwd: FIXTURES, options: { inheritEnv: 'PATH,LANG' } });
    expect(loaded).toMatchObject({ source: 'builtin', location: 'host', descriptor: { name: 'host' } });
  });

  it.each([
    [
      './wrong-contract.mjs',
      {},
      /--runtime \.\/wrong-contract\.mjs: runtime plugin "from-the-future" 9\.0\.0 was written for Runtime contract 2\.0\.0, but this @berth\/runtime speaks contract 1\.x \(it defines 1\.\d+\.\d+\)\. Use a release of the plugin made for contract 1\.x.*This worker speaks Runtime contract 1\.x \(it implements 1\.\d+\.\d+\)\./,
    ],
    [
      './no-export.mjs',
      {},
      /the module has no default export and no export named "runtime", and more than one named export that is a descriptor or a factory \(it exports: helper \(function\), format \(function\), VERSION \(string\)\)\. A runtime plugin exports its descriptor/,
    ],
    [
      './strict-options.mjs',
      { replicas: 'many' },
      /^--runtime \.\/strict-options\.mjs: the plugin's configuration is invalid \(replicas=…\): option replicas must be a whole number; got "many"$/,
    ],
    [
      './not-descriptor.mjs',
      {},
      /the plugin's export is not a runtime descriptor: it lacks a version, a contract version, a create\(ctx, config\) function\. Build it with `defineRuntime/,
    ],
    ['./shell-plugin.mjs', { colour: 'blue' }, /the plugin refused its options \(colour=…\): unknown option "colour"; known: root, greeting/],
    ['./wrong-contract.mjs', { a: '1' }, /exports a descriptor, not a function, so it takes no --runtime-option \(got a=…\)/],
    ['host', { cpus: '2' }, /--runtime-option: the host runtime has no option "cpus"; its options: root, inheritEnv/],
    ['docker', { cpus: 'many' }, /option cpus of the docker runtime must be a number; got "many"/],
    ['./missing.mjs', {}, /--runtime \.\/missing\.mjs: no such file .*missing\.mjs\. Give docker, kubernetes, host, an installed package name, or a path/],
    [
      'berth-runtime-nowhere',
      {},
      /--runtime berth-runtime-nowhere: not a built-in runtime \(docker, kubernetes, host\), and no installed package of that name was found/,
    ],
  ])('%s %j: a clear usage error', async (spec, options, message) => {
    const error = (await loadRuntime(spec, { cwd: FIXTURES, options }).catch((e: unknown) => e)) as Error & { exitCode?: number };
    expect(error).toBeInstanceOf(Error);
    expect(error.message).toMatch(message);
    expect(error.exitCode).toBe(2);
  });
});

describe('berth exec --runtime / --runtime-option (in process)', () => {
  it('refuses a malformed --runtime-option and a plugin of another contract with exit 2 and one message, before anything runs', async () => {
    const bad = await runCli(['exec', '--runtime', 'host', '--runtime-option', 'noequals', HELLO], { cwd: FIXTURES });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/runtime-option \(flag --runtime-option\): options look like key=value, got "noequals"/);
    const wrong = await runCli(['exec', '--runtime', './wrong-contract.mjs', HELLO], { cwd: FIXTURES });
    expect(wrong.code).toBe(2);
    expect(wrong.stderr).toMatch(/^berth: --runtime \.\/wrong-contract\.mjs: runtime plugin "from-the-future"/);
    expect(wrong.stderr).not.toMatch(/\n\s+at /); // no stack trace
  });

  it.each([
    ['exec', ['exec', '--runtime', 'host', HELLO]],
    ['start', ['start', '--runtime-plugin', 'host']],
  ])('%s: a list-valued option keeps its commas (inheritEnv=PATH,HOME is one option), from flags and BERTH_RUNTIME_OPTIONS', async (_, command) => {
    const env = { VELA_SERVER_ADDR: 'http://vela.test', VELA_SERVER_SECRET: 'x', VELA_WORKER_ADDR: 'http://w.test' };
    const flags = await runCli([...command, '--runtime-option', 'inheritEnv=PATH,HOME', '--runtime-option', 'root=/tmp/r', '--check-config'], {
      cwd: FIXTURES,
      env,
    });
    expect(flags.stderr).toBe('');
    expect(flags.code).toBe(0);
    expect(flags.stdout).toMatch(/runtime-option: \["inheritEnv=PATH,HOME","root=\/tmp\/r"\]/);
    const fromEnv = await runCli([...command, '--check-config'], { cwd: FIXTURES, env: { ...env, BERTH_RUNTIME_OPTIONS: 'inheritEnv=PATH,HOME,root=/tmp/r' } });
    expect(fromEnv.stderr).toBe('');
    expect(fromEnv.stdout).toMatch(/runtime-option: \["inheritEnv=PATH,HOME","root=\/tmp\/r"\]/);
  });

  it('the README names the runtime flag as the help does', async () => {
    const help = await runCli(['exec', '--help'], { cwd: FIXTURES });
    expect(help.stdout).toContain('-r, --runtime-driver <value>');
    expect(help.stdout.replace(/\s+/g, ' ')).toContain('--runtime is the same flag');
    const readme = readFileSync(path.join(import.meta.dirname, '../../../README.md'), 'utf8');
    expect(readme).toContain('`berth exec -r, --runtime-driver` (`--runtime` is the same flag)');
  });

  it("reports a RuntimeError from the plugin's own copy of @berth/runtime as the plugin's configuration error, not as a bug in Berth", async () => {
    // A plugin built against its own installed @berth/runtime: a physical copy of the errors module.
    const dir = mkdtempSync(path.join(tmpdir(), 'berth-copy-plugin-'));
    try {
      copyFileSync(path.join(import.meta.dirname, '../../../packages/runtime/src/errors.ts'), path.join(dir, 'errors.ts'));
      writeFileSync(
        path.join(dir, 'plugin.mjs'),
        `import { RuntimeError } from './errors.ts';
export default {
  name: 'copied',
  version: '1.0.0',
  contract: '1.2.0',
  async create() {
    throw new RuntimeError('InvalidConfig', 'endpoint must be a URL; got "nowhere"', { runtime: 'copied', operation: 'create' });
  },
};
`,
      );
      const run = await runCli(['exec', '--runtime', path.join(dir, 'plugin.mjs'), HELLO], { cwd: dir });
      expect(run.stderr).not.toContain('bug in Berth');
      expect(run.stderr).toContain(`berth: the copied runtime's configuration is invalid: endpoint must be a URL; got "nowhere"\n`);
      expect(run.code).toBe(2);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('berth runtimes lists the built-ins with their contract', async () => {
    const run = await runCli(['runtimes', '--json'], { cwd: FIXTURES });
    expect(run.code).toBe(0);
    const listings = JSON.parse(run.stdout) as { spec: string; source: string; contract?: string; problem?: string }[];
    expect(listings.map((l) => [l.spec, l.source, l.problem])).toEqual([
      ['docker', 'builtin', undefined],
      ['kubernetes', 'builtin', undefined],
      ['host', 'builtin', undefined],
    ]);
    expect(listings.every((l) => l.contract?.startsWith('1.'))).toBe(true);
  });
});

/**
 * Runs the real `berth` process in `cwd`, with a TMPDIR of its own (removed after the file): the
 * host runtime, which these runs use (the shell plugin delegates to it), keeps its builds under
 * `<tmpdir>/berth-host` and a directory per worker there after the builds are gone.
 */
function berth(args: string[], cwd: string): Promise<ProcessRun> {
  return spawnBerth(args, cwd, { TMPDIR: tempDir('berth-plugins-tmp-') });
}

describe('berth runtimes verify', () => {
  it('prints the table of a conforming plugin and exits 0', async () => {
    const run = await berth(['runtimes', 'verify', './shell-plugin.mjs', '--filter', 'exit code'], FIXTURES);
    expect(run.code, run.stderr + run.stdout).toBe(0);
    expect(run.stdout).toContain('Verifying fixture-shell 0.3.1 (./shell-plugin.mjs) against the Runtime conformance suite');
    expect(run.stdout).toMatch(/^RESULT {3}REQUIREMENT +CASE$/m);
    expect(run.stdout).toMatch(/^passed {3}required +container: reports exit code 1 and stops the script at its first failing command$/m);
    expect(run.stdout).toMatch(/: \d+ passed, 0 failed, \d+ skipped\.\nIt conforms\.\n$/);
  }, 120_000);

  it('exits 1 on a required failure, with the reason under the case, and honours the plugin’s conformance export', async () => {
    const run = await berth(['runtimes', 'verify', './lying-exit.mjs', '--filter', 'exit code', '--filter', 'images'], FIXTURES);
    expect(run.code, run.stderr + run.stdout).toBe(1);
    expect(run.stdout).toMatch(/^failed {3}required +container: reports another exit code \(3\) as is\n +└ AssertionError: exit code; the container's log:/m);
    expect(run.stdout).toMatch(
      /^skipped {2}required +images: a missing image with pull policy never is reported as ImageNotFound, promptly\n +└ lacks images: steps run on the host$/m,
    );
    expect(run.stdout).toMatch(/It does not conform: \d+ required cases failed\.\n$/);
  }, 120_000);

  it("takes a built-in's skips from its module's conformance export", async () => {
    const run = await runCli(['runtimes', 'verify', 'host', '--filter', 'images'], { cwd: FIXTURES });
    expect(run.code, run.stderr + run.stdout).toBe(0);
    expect(run.stdout).toMatch(
      /^skipped {2}required +images: an invalid image reference .*\n +└ lacks images: the host runtime runs no images: steps run on the host$/m,
    );
  }, 60_000);

  it('refuses an unknown capability in --skip as usage', async () => {
    const run = await runCli(['runtimes', 'verify', './shell-plugin.mjs', '--skip', 'teleport=no'], { cwd: FIXTURES });
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/unknown capability "teleport" in skip; known: privileged, user/);
  });
});

describe('berth exec end to end, without containers', () => {
  it('berth exec --runtime host examples/hello.yml runs the steps on this host, in the current directory, and warns that it isolates nothing', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'berth-host-e2e-'));
    try {
      copyFileSync(HELLO, path.join(dir, 'hello.yml'));
      const run = await berth(['exec', '--runtime', 'host', 'hello.yml'], dir);
      expect(run.code, run.stderr + run.stdout).toBe(0);
      expect(run.stdout).toContain('greet │ hello from Berth');
      expect(run.stdout).toContain(`read  │ this step runs in ${dir}`);
      expect(run.stdout).toMatch(/tick 1\n.*tick 2\n.*tick 3/s);
      expect(run.stdout).toMatch(/build localOrg_localRepo_1 ✓ success/);
      expect(run.stderr).toContain('the host runtime gives no isolation');
      expect(existsSync(path.join(dir, 'greeting.txt')), 'the read step removed the file it read').toBe(false);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);

  it('berth exec --runtime <path to a plugin outside the packages> --runtime-option runs the build through that plugin', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'berth-plugin-e2e-'));
    try {
      copyFileSync(HELLO, path.join(dir, 'hello.yml'));
      const plugin = path.join(FIXTURES, 'shell-plugin.mjs');
      const run = await berth(['exec', '--runtime', plugin, '--runtime-option', 'greeting=hello-from-options', 'hello.yml'], dir);
      expect(run.code, run.stderr + run.stdout).toBe(0);
      expect(run.stderr).toContain('fixture-shell: hello-from-options');
      // The fixture delegates to the host runtime, whose runtime object names itself; a plugin that is
      // not docker or host gets a workspace of its own rather than the current directory.
      expect(run.stdout).toMatch(/^build localOrg_localRepo_1 on host/m);
      expect(run.stdout).toMatch(/read {2}│ this step runs in .*\/workspace\n/);
      expect(run.stdout).toMatch(/build localOrg_localRepo_1 ✓ success/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);
});
