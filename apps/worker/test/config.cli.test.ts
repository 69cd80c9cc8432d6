// One settings table for `berth start` and `berth exec`: --config files, one duration syntax,
// container limits, shared names, grouped help, and a durable state directory.
import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { defaultStateDir } from '../src/config/state-dir.ts';
import { readStartConfig } from '../src/vela/config.ts';
import { runCli } from './run-cli.ts';
import { tempDir } from './temp-dir.ts';

const BASE = { VELA_SERVER_ADDR: 'http://vela.example:8080', VELA_SERVER_SECRET: 's3cret' };
const tmp = (): string => tempDir('berth-config-');

/** `berth <command> … --check-config`, each line as `flag → "value (source)"`. */
async function resolved(args: string[], env: Record<string, string> = {}, cwd?: string) {
  const run = await runCli([...args, '--check-config'], { env, ...(cwd ? { cwd } : {}) });
  const lines = new Map<string, string>();
  for (const line of run.stdout.split('\n')) {
    const m = /^([\w-]+): (.*?) {2}# (.*)$/.exec(line);
    if (m) lines.set(m[1]!, `${m[2]!} (${m[3]!})`);
  }
  return { ...run, lines };
}

describe('--config FILE (YAML), as the Buildkite agent takes one', () => {
  it('reads flat, Vela-dotted and nested keys; flags and variables win over it; the defaults lose to it', async () => {
    const dir = tmp();
    writeFileSync(
      path.join(dir, 'berth.yml'),
      [
        'build-limit: 3',
        'build.timeout: 45m',
        'queue:',
        '  routes: [large, gpu]',
        '  pop.timeout: 20s',
        'checkIn: 2m',
        'log-level: Debug',
        'drain-grace: 1m',
        'container-memory: 512m',
      ].join('\n'),
    );
    const { code, stderr, lines } = await resolved(['start', '--config', 'berth.yml', '--drain-grace', '30s'], { ...BASE, VELA_CHECK_IN: '4m' }, dir);
    expect(stderr).toBe('');
    expect(code).toBe(0);
    const from = `config ${path.join(dir, 'berth.yml')}`;
    expect(lines.get('build-limit')).toBe(`3 (${from})`);
    expect(lines.get('build-timeout')).toBe(`45m0s (${from})`);
    expect(lines.get('queue-routes')).toBe(`["large","gpu"] (${from})`);
    expect(lines.get('queue-pop-timeout')).toBe(`20s (${from})`);
    expect(lines.get('log-level')).toBe(`"debug" (${from})`);
    expect(lines.get('container-memory')).toBe(`536870912 (${from})`);
    expect(lines.get('check-in')).toBe('4m0s (env VELA_CHECK_IN)');
    expect(lines.get('drain-grace')).toBe('30s (flag --drain-grace)');
    expect(lines.get('stop-grace')).toBe('10s (default)');
  });

  it('BERTH_CONFIG names it too; an unknown key, a bad value and a missing file are problems listed together', async () => {
    const dir = tmp();
    writeFileSync(path.join(dir, 'berth.yml'), 'build-limit: many\nbuild-limt: 2\n');
    const run = await runCli(['start'], { env: { ...BASE, BERTH_CONFIG: 'berth.yml', VELA_LOG_FORMAT: 'xml' }, cwd: dir });
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/\(3 problems\)/);
    expect(run.stderr).toMatch(/config .*berth\.yml: "build-limt" is not a setting of berth start/);
    expect(run.stderr).toMatch(/build\.limit \(config .*berth\.yml\): must be a whole number, got "many"/);
    expect(run.stderr).toMatch(/log\.format \(env VELA_LOG_FORMAT\)/);
    const missing = await runCli(['start', '--config', '/nonexistent/berth.yml'], { env: BASE });
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/cannot read the config file \/nonexistent\/berth\.yml: no such file/);
    const list = await runCli(['start', '--config', 'list.yml'], { env: BASE, cwd: (writeFileSync(path.join(dir, 'list.yml'), '- a\n'), dir) });
    expect(list.stderr).toMatch(/must be a map of settings/);
  });

  it('--check-config redacts secrets and its output is a config file giving the same settings', async () => {
    const dir = tmp();
    const first = await resolved(['start', '--queue-addr', 'redis://:pw@r:6379', '--build-limit', '2'], BASE, dir);
    expect(first.code).toBe(0);
    expect(first.stdout).not.toContain('s3cret');
    expect(first.stdout).not.toContain(':pw@');
    expect(first.lines.get('server-secret')).toBe('"[redacted]" (env VELA_SERVER_SECRET)');
    writeFileSync(path.join(dir, 'again.yml'), first.stdout.replace(/^(server-secret|queue-addr):.*$/gm, ''));
    const again = await resolved(['start', '--config', 'again.yml'], { VELA_SERVER_SECRET: 's3cret' }, dir);
    expect(again.code).toBe(0);
    expect(again.lines.get('build-limit')).toBe(`2 (config ${path.join(dir, 'again.yml')})`);
    expect(again.lines.get('server-addr')).toBe(`"http://vela.example:8080" (config ${path.join(dir, 'again.yml')})`);
  });
});

describe("one duration syntax: Go's, for start and exec alike", () => {
  // go-vela/worker's build.timeout is a cli.DurationFlag (cmd/vela-worker/flags.go): "5" is
  // refused by time.ParseDuration. Only a repo's timeout is in minutes (server api/types/repo.go).
  it('exec --timeout 5 and VELA_BUILD_TIMEOUT=5 are refused alike, with the fix', async () => {
    const exec = await runCli(['exec', '--timeout', '5', 'nonexistent.yml']);
    const start = await runCli(['start'], { env: { ...BASE, VELA_BUILD_TIMEOUT: '5' } });
    for (const run of [exec, start]) {
      expect(run.code).toBe(2);
      expect(run.stderr).toMatch(/build\.timeout \(.*\): must be a Go duration with a unit \(5s, 5m, 5h\), got "5": a bare number is not one/);
    }
  });

  it('exec --timeout 90s is 90 seconds', async () => {
    const { lines } = await resolved(['exec', '--timeout', '1m30s']);
    expect(lines.get('build-timeout')).toBe('1m30s (flag --build-timeout)');
  });
});

describe('exec and start use the same names', () => {
  it('exec takes --runtime-config/--runtime-namespace/--build-timeout, and the old --kubeconfig/--namespace/--timeout as hidden aliases', async () => {
    const vela = await resolved(['exec', '--runtime-driver', 'kubernetes', '--runtime-config', '/k', '--runtime-namespace', 'ci', '--build-timeout', '5m']);
    const old = await resolved(['exec', '--runtime', 'kubernetes', '--kubeconfig', '/k', '--namespace', 'ci', '-t', '5m']);
    expect(vela.code).toBe(0);
    expect(old.code).toBe(0);
    for (const flag of ['runtime-driver', 'runtime-config', 'runtime-namespace', 'build-timeout']) expect(old.lines.get(flag)).toBe(vela.lines.get(flag));
    const help = await runCli(['exec', '--help']);
    expect(help.stdout).toContain('--runtime-config');
    expect(help.stdout).not.toMatch(/--kubeconfig|--namespace /);
    expect(help.stdout).not.toContain('/vela/'); // exec reads no /vela file fallbacks
  });
});

describe('container limits (Berth extension)', () => {
  it('start reads them for the runtime; a pipeline cannot ask for resources, so they are per-container defaults', () => {
    const { extras } = readStartConfig({ env: { ...BASE, BERTH_CONTAINER_CPUS: '1.5', BERTH_CONTAINER_MEMORY: '2g', BERTH_CONTAINER_PIDS: '256' } });
    expect(extras.containerLimits).toEqual({ cpus: 1.5, memoryBytes: 2 * 2 ** 30, pidsLimit: 256 });
  });

  it('bad values and the kubernetes runtime (which takes resources from its pods template) are refused', async () => {
    const run = await runCli(['start', '--container-cpus', '0', '--container-memory', 'lots', '--container-pids', '-1'], { env: BASE });
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/container-cpus \(flag --container-cpus\): must be a number of CPUs greater than 0/);
    expect(run.stderr).toMatch(/container-memory \(flag --container-memory\): must be a size like 512m/);
    expect(run.stderr).toMatch(/container-pids \(flag --container-pids\): must be at least 1/);
    const kube = await runCli(['exec', '--runtime', 'kubernetes', '--container-memory', '1g', 'x.yml']);
    expect(kube.code).toBe(2);
    expect(kube.stderr).toMatch(/container-memory \(flag --container-memory\): the kubernetes runtime does not apply container limits/);
  });
});

describe('start --help', () => {
  it('groups options, wraps at the terminal width and hides unsupported flags', async () => {
    for (const width of [72, 100]) {
      const run = await runCli(['start', '--help'], { env: { COLUMNS: String(width) } });
      expect(run.code).toBe(0);
      const long = run.stdout.split('\n').filter((l) => l.length > width);
      expect(long).toEqual([]);
      for (const group of [
        'Worker:',
        'Vela server:',
        'Builds:',
        'Queue:',
        'Runtime:',
        'Container limits (Berth extension):',
        'Logging:',
        'Berth:',
        'Configuration:',
      ])
        expect(run.stdout).toContain(`\n${group}\n`);
      for (const hidden of ['--storage-file-size-limit']) expect(run.stdout).not.toContain(hidden);
      // go-vela/worker's own flags, shown as its help shows them (issue #26 item 5).
      for (const shown of ['--executor-driver', '--queue-private-key']) expect(run.stdout).toContain(shown);
      expect(run.stdout.replace(/\s+/g, ' ')).toContain("0: Berth's default cap of 16 MiB with a 1 MiB tail");
      // Outputs are supported: the flag that turns them on is shown.
      expect(run.stdout).toContain('--executor-outputs-image');
    }
  });
});

describe('the state directory', () => {
  it('defaults to $STATE_DIRECTORY, /var/lib/berth-worker as root, else the XDG state directory, never a tmpdir', () => {
    expect(defaultStateDir({ STATE_DIRECTORY: '/var/lib/berth:/other' }, 1000)).toBe('/var/lib/berth');
    expect(defaultStateDir({}, 0)).toBe('/var/lib/berth-worker');
    expect(defaultStateDir({ XDG_STATE_HOME: '/home/u/.state' }, 1000)).toBe('/home/u/.state/berth-worker');
    expect(defaultStateDir({ XDG_STATE_HOME: 'relative' }, 1000, () => '/home/u')).toBe('/home/u/.local/state/berth-worker');
    const { extras } = readStartConfig({ env: { ...BASE, STATE_DIRECTORY: '/srv/state' } });
    expect(extras.stateDir).toBe('/srv/state');
    expect(readStartConfig({ env: BASE }).extras.stateDir.startsWith(tmpdir())).toBe(false);
  });

  it('`berth --version` loads no daemon code', { timeout: 120_000 }, async () => {
    const main = pathToFileURL(path.join(import.meta.dirname, '../src/main.ts')).href;
    const script = `
      import { registerHooks } from 'node:module';
      const loaded = [];
      registerHooks({
        resolve: (s, c, next) => next(s, { ...c, conditions: [...c.conditions, '@berth/source'] }),
        load: (url, c, next) => (loaded.push(url), next(url, c)),
      });
      const { main } = await import(${JSON.stringify(main)});
      const io = { stdout: { write() {} }, stderr: process.stderr, env: {}, cwd: process.cwd(), exitCode: 0 };
      await main(['node', 'berth', '--version'], io);
      console.log(JSON.stringify({ total: loaded.length, daemon: loaded.filter((u) => /\\/daemon\\/|find-my-way|ioredis|prom-client/.test(u)) }));`;
    const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', script]);
    const result = JSON.parse(stdout.trim().split('\n').at(-1)!) as { total: number; daemon: string[] };
    expect(result.total).toBeGreaterThan(10);
    expect(result.daemon).toEqual([]);
  });
});
