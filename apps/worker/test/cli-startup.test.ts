// The CLI loads only what the command needs: `berth --version` no TypeScript at all,
// `berth validate` neither the executor, the runtimes nor the daemon's server and queue client,
// `berth exec` none of the daemon, and `berth start` only the runtime it runs on.
import { execFile, spawn } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bundle } from '../bin/bundle.js';

const run = promisify(execFile);
const APP = path.resolve(import.meta.dirname, '..');
const ROOT = path.resolve(APP, '../..');
const BIN = path.join(APP, 'bin/berth.js');
const TRACE = path.join(import.meta.dirname, 'fixtures/trace-loads.mjs');
let dir: string;
let traces = 0;

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'berth-cli-startup-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function loads(args: string[], env: Record<string, string> = {}): Promise<{ stdout: string; modules: string[] }> {
  const file = path.join(dir, `${++traces}-${args.join('_').replace(/\W/g, '_')}.txt`);
  const { stdout } = await run(process.execPath, ['--import', TRACE, BIN, ...args], {
    cwd: path.resolve(APP, '../..'),
    env: { ...process.env, ...env, BERTH_TRACE_LOADS: file, NODE_OPTIONS: '' },
  });
  const modules = (await readFile(file, 'utf8').catch(() => '')).split('\n').filter(Boolean);
  return { stdout, modules: [...modules, ...(await bundled(modules))] };
}

/**
 * The modules inside the chunks of the bundle (dist/bundle/, bin/bundle.js) among `loaded`, from
 * their source maps: what the checks below look for is inside a chunk, not a file of its own.
 */
async function bundled(loaded: string[]): Promise<string[]> {
  const chunks = loaded.filter((m) => m.startsWith(pathToFileURL(path.join(APP, 'dist/bundle/')).href));
  const inside = await Promise.all(
    chunks.map(async (chunk) => {
      // A chunk made only of the bundler's own helpers has no map.
      const text = await readFile(new URL(`${chunk}.map`), 'utf8').catch(() => '{"sources":[]}');
      return (JSON.parse(text) as { sources: string[] }).sources.map((source) => new URL(source, chunk).href);
    }),
  );
  return inside.flat();
}

describe('berth start-up', () => {
  it('answers --version from package.json without loading TypeScript or a dependency', async () => {
    const { stdout, modules } = await loads(['--version']);
    const manifest = JSON.parse(await readFile(path.join(APP, 'package.json'), 'utf8')) as { version: string };
    expect(stdout.trim()).toBe(manifest.version);
    expect(modules.filter((m) => m.endsWith('.ts') || m.includes('node_modules'))).toEqual([]);
  });

  it('validate loads neither the executor, a runtime, nor the daemon', async () => {
    const { stdout, modules } = await loads(['validate', 'examples/hello.yml']);
    expect(stdout).toContain('is valid');
    const heavy = modules.filter((m) => /executor|runtime-docker|runtime-kubernetes|dockerode|client-node|find-my-way|ioredis|daemon/.test(m));
    expect(heavy).toEqual([]);
  });

  it('still lists every command in --help', async () => {
    const { stdout } = await loads(['--help']);
    for (const command of ['exec', 'validate', 'compile', 'start']) expect(stdout).toMatch(new RegExp(`^  ${command} `, 'm'));
  });
});

/**
 * Runs `berth start` (with `nodeArgs` before the command) against a server that is not there,
 * until its log satisfies `ready`; calls `whileRunning` with its pid, then stops it.
 */
async function whileStarted<T>(
  options: { nodeArgs?: string[]; env: Record<string, string>; ready: (stderr: string) => boolean },
  whileRunning: (pid: number) => Promise<T>,
): Promise<T> {
  const child = spawn(process.execPath, [...(options.nodeArgs ?? []), BIN, 'start'], {
    cwd: dir,
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '/tmp',
      VELA_SERVER_ADDR: 'http://127.0.0.1:9',
      VELA_SERVER_SECRET: 'not-used',
      VELA_WORKER_ADDR: 'http://cli-startup-test:8080',
      VELA_RUNTIME_DRIVER: 'docker',
      VELA_LOG_FORMAT: 'json',
      BERTH_LISTEN: '127.0.0.1:0',
      BERTH_STATE_DIR: dir,
      ...options.env,
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  try {
    await new Promise<void>((resolve, reject) => {
      child.stderr.on('data', (b: Buffer) => {
        stderr += b.toString();
        if (options.ready(stderr)) resolve();
      });
      void exited.then((code) => reject(new Error(`berth start exited ${code} before it was ready: ${stderr.slice(-1000)}`)));
    });
    return await whileRunning(child.pid!);
  } finally {
    child.kill('SIGTERM');
    await exited;
  }
}

/** Runs `berth start` until its runtime is ready and it has tried to call the server (its log says both); returns what it loaded by then. */
async function startLoads(runtime: string): Promise<string[]> {
  const file = path.join(dir, `start-${runtime}.txt`);
  await whileStarted(
    {
      nodeArgs: ['--import', TRACE],
      env: { BERTH_TRACE_LOADS: file, VELA_RUNTIME_DRIVER: runtime },
      // Ready, and it has called the (absent) Vela server: the client's transport is loaded too.
      ready: (stderr) => stderr.includes('"msg":"runtime ready"') && stderr.includes('"msg":"vela api call failed, retrying"'),
    },
    () => Promise.resolve(),
  );
  const modules = (await readFile(file, 'utf8')).split('\n').filter(Boolean);
  return [...modules, ...(await bundled(modules))];
}

/** Runs `berth start` until its runtime is ready; returns the command line its process (the pid spawned) then runs. */
async function startCommandLine(extraEnv: Record<string, string> = {}, nodeArgs: string[] = []): Promise<string[]> {
  return whileStarted({ nodeArgs, env: extraEnv, ready: (stderr) => stderr.includes('"msg":"runtime ready"') }, async (pid) =>
    (await readFile(`/proc/${pid}/cmdline`, 'utf8')).split('\0').filter(Boolean),
  );
}

/** Runs `berth start` until its runtime is ready; returns the malloc settings (MALLOC_*, GLIBC_TUNABLES) in its process's environment then. */
async function startMallocEnv(extraEnv: Record<string, string> = {}, nodeArgs: string[] = []): Promise<Record<string, string>> {
  return whileStarted({ nodeArgs, env: extraEnv, ready: (stderr) => stderr.includes('"msg":"runtime ready"') }, async (pid) => {
    const environ = (await readFile(`/proc/${pid}/environ`, 'utf8')).split('\0');
    const malloc = environ.filter((e) => e.startsWith('MALLOC_') || e.startsWith('GLIBC_TUNABLES='));
    return Object.fromEntries(malloc.map((e) => [e.slice(0, e.indexOf('=')), e.slice(e.indexOf('=') + 1)]));
  });
}

/** `berth --build-info`: `compiled: …` or `source: <why>`. */
async function buildInfo(env: Record<string, string> = {}): Promise<string> {
  return (await run(process.execPath, [BIN, '--build-info'], { env: { ...process.env, ...env } })).stdout.trim();
}

describe('berth runs compiled JavaScript when fresh, else its sources', () => {
  it('from source (BERTH_FROM_SOURCE=1, as without a build), runs the TypeScript sources of the app and the packages', async () => {
    expect(await buildInfo({ BERTH_FROM_SOURCE: '1' })).toBe('source: BERTH_FROM_SOURCE is set');
    const { stdout, modules } = await loads(['validate', 'examples/hello.yml'], { BERTH_FROM_SOURCE: '1' });
    expect(stdout).toContain('is valid');
    expect(modules).toContain(pathToFileURL(path.join(APP, 'src/main.ts')).href);
    expect(modules.some((m) => m.includes('/packages/pipeline/src/'))).toBe(true);
  });

  it('compiled (after `pnpm build`), loads no TypeScript: neither the app nor a package is type-stripped', async () => {
    if (!(await buildInfo()).startsWith('compiled')) {
      // The sources changed since the last build, or there is none: build what berth runs
      // (turbo: cached when nothing changed). The test command builds before testing anyway.
      await run(path.join(ROOT, 'node_modules/.bin/turbo'), ['run', 'build', '--filter=@berth/worker...', '--output-logs=errors-only'], { cwd: ROOT });
    }
    expect(await buildInfo()).toMatch(/^compiled: built /);
    const { stdout, modules } = await loads(['validate', 'examples/hello.yml']);
    expect(stdout).toContain('is valid');
    expect(modules).toContain(pathToFileURL(path.join(APP, 'dist/bundle/main.js')).href);
    expect(modules.some((m) => m.startsWith(pathToFileURL(path.join(ROOT, 'packages/pipeline/dist/')).href))).toBe(true);
    expect(modules.filter((m) => m.endsWith('.ts'))).toEqual([]);
  }, 300_000);
});

const DOCKERODE = createRequire(path.join(ROOT, 'packages/runtime-docker/package.json')).resolve('dockerode');

/**
 * Bundles an entry module made of `lines` with the worker's bundler and runs it: its stdout and
 * the text of each chunk. The bundle sits next to the app so that its stand-ins resolve the real
 * modules through the app's node_modules, as dist/bundle/ does.
 */
async function bundleAndRun(lines: string[]): Promise<{ stdout: string; chunks: string[] }> {
  const out = await mkdtemp(path.join(APP, 'node_modules/.berth-bundle-test-'));
  try {
    const entry = path.join(out, 'entry.mjs');
    await writeFile(entry, `${lines.join('\n')}\n`);
    await bundle({ input: entry, outDir: path.join(out, 'bundle') });
    const { stdout } = await run(process.execPath, [path.join(out, 'bundle/main.js')], { env: { ...process.env, NODE_OPTIONS: '' } });
    const files = (await readdir(path.join(out, 'bundle'))).filter((f) => f.endsWith('.js'));
    return { stdout, chunks: await Promise.all(files.map((f) => readFile(path.join(out, 'bundle', f), 'utf8'))) };
  } finally {
    await rm(out, { recursive: true, force: true });
  }
}

/** What the lazy-deps probe printed: gRPC and ssh2 not loaded at start, loaded and working once used. */
function expectDockerExtrasLazy(stdout: string): void {
  const result = JSON.parse(stdout) as { atStart: Record<string, boolean>; afterUse: Record<string, boolean>; sshError: string; sessionError: string };
  expect(result.atStart).toEqual({ grpc: false, ssh2: false, any: false });
  expect(result.afterUse).toEqual({ grpc: true, ssh2: true });
  // The real modules ran: their connection attempts failed as they should, not the stand-ins.
  expect(result.sshError).toMatch(/ECONNREFUSED/);
  expect(result.sessionError).toMatch(/ENOENT/);
}

describe('berth start-up, per command', () => {
  it('exec loads none of the daemon: no HTTP server, queue client, metrics, or Kubernetes client', async () => {
    await writeFile(
      path.join(dir, 'one.yml'),
      'version: "1"\nsteps:\n  - name: one\n    image: berth/busybox:1.35\n    pull: not_present\n    commands: [true]\n',
    );
    const { stdout, modules } = await loads(['exec', '--no-color', path.join(dir, 'one.yml')], {
      BERTH_BUILD_NUMBER: String(Math.floor(Math.random() * 1e9)),
    });
    expect(stdout).toMatch(/success/);
    expect(modules.some((m) => /runtime-docker/.test(m))).toBe(true);
    const daemon = modules.filter((m) =>
      /\/daemon\/|\/vela\/(?:client|queue|reporter|auth|claim|log-upload)|find-my-way|ioredis|prom-client|client-node|runtime-kubernetes/.test(m),
    );
    expect(daemon).toEqual([]);
    // No fetch either: an ES import of node:http loads undici for its WebSocket exports.
    expect(modules.filter((m) => m.includes('undici'))).toEqual([]);
    // Its stderr is no terminal: its own log is JSON, so pino-pretty is not loaded.
    expect(modules.filter((m) => /\/pino-pretty@/.test(m))).toEqual([]);
    // bin/lazy-deps.js: dockerode's BuildKit session (gRPC, protobuf) and docker-modem's SSH transport wait for first use.
    expect(modules.filter((m) => /@grpc|protobufjs|\/ssh2@/.test(m))).toEqual([]);
  }, 60_000);

  it('the Docker client parts loaded on first use still work when used (bin/lazy-deps.js)', async () => {
    const { stdout } = await run(process.execPath, [path.join(import.meta.dirname, 'fixtures/lazy-deps-check.mjs')], {
      env: { ...process.env, NODE_OPTIONS: '' },
    });
    expectDockerExtrasLazy(stdout);
  }, 60_000);

  it('bundled (bin/bundle.js), the same parts stay on disk until first used, and then work', async () => {
    const { stdout } = await bundleAndRun([
      `import Docker from ${JSON.stringify(DOCKERODE)};`,
      `import { probe } from ${JSON.stringify(path.join(import.meta.dirname, 'fixtures/lazy-deps-probe.mjs'))};`,
      'await probe(Docker);',
    ]);
    expectDockerExtrasLazy(stdout);
  }, 60_000);

  it('bundled, node:tls and node:https load on first use (an import, a require, a getBuiltinModule call) and then work; the chunks are ASCII', async () => {
    // docker-modem requires https at load and derives an object from the module (lib/http.js);
    // an ES module imports node:tls and calls process.getBuiltinModule('node:https'), as the
    // Docker runtime does. Nothing reads them until a connection is opened.
    const { stdout, chunks } = await bundleAndRun([
      `import Docker from ${JSON.stringify(DOCKERODE)};`,
      `import tls from 'node:tls';`,
      `const https = process.getBuiltinModule('node:https');`,
      `const loaded = () => ({ tls: process.moduleLoadList.includes('NativeModule tls'), https: process.moduleLoadList.includes('NativeModule https') });`,
      `new Docker({ socketPath: '/nonexistent.sock' });`,
      `const atStart = loaded();`,
      `const refused = (open) => new Promise((resolve) => open().once('error', (e) => resolve(e.code)));`,
      `const tlsError = await refused(() => tls.connect({ host: '127.0.0.1', port: 9 }));`,
      `const httpsError = await refused(() => https.request('https://127.0.0.1:9/').end());`,
      `const modemError = await new Docker({ protocol: 'https', host: '127.0.0.1', port: 9 }).version().then(() => 'none', (e) => e.code);`,
      `console.log(JSON.stringify({ atStart, afterUse: loaded(), tlsError, httpsError, modemError, agent: new https.Agent() instanceof https.Agent, arrow: '\u2192'.length }));`,
    ]);
    expect(JSON.parse(stdout)).toEqual({
      atStart: { tls: false, https: false },
      afterUse: { tls: true, https: true },
      tlsError: 'ECONNREFUSED',
      httpsError: 'ECONNREFUSED',
      modemError: 'ECONNREFUSED',
      agent: true,
      arrow: 1,
    });
    // ASCII (the entry has a "\u2192"), so V8 holds each chunk's source at one byte per character.
    for (const chunk of chunks) expect([...chunk].every((c) => c.charCodeAt(0) < 0x80)).toBe(true);
  }, 60_000);

  it('start runs with 1 MB young-generation semi-spaces, no optimizing compiler and feedback only for functions called 100 times, in the process started, unless Node is told otherwise', async () => {
    const compilers = ['--turbo-filter=~', '--no-maglev', '--invocation-count-for-feedback-allocation=100'];
    // Code not run for 3 full collections dropped; V8's collection under a name of its own (memory.ts).
    const idle = ['--bytecode-old-age=3', '--flush-baseline-code', '--expose-gc-as=__berthCollectGarbage'];
    const own = await startCommandLine();
    expect(own).toEqual([process.execPath, '--max-semi-space-size=1', ...compilers, ...idle, BIN, 'start']);
    const exposed = await startCommandLine({}, ['--expose-gc']);
    expect(exposed).toEqual([process.execPath, '--expose-gc', '--max-semi-space-size=1', ...compilers, ...idle.slice(0, 2), BIN, 'start']);
    // NODE_OPTIONS may set the semi-space size (not the compilers: Node does not take them there).
    const size = await startCommandLine({ NODE_OPTIONS: '--max-semi-space-size=2' });
    expect(size).toEqual([process.execPath, ...compilers, ...idle, BIN, 'start']);
    const turbofan = await startCommandLine({ NODE_OPTIONS: '--max-semi-space-size=2' }, ['--turbo-filter=*']);
    expect(turbofan).toEqual([process.execPath, '--turbo-filter=*', '--no-maglev', '--invocation-count-for-feedback-allocation=100', ...idle, BIN, 'start']);
    // Each setting on its own: node --maglev keeps Maglev, a count of its own keeps that count.
    const maglev = await startCommandLine({ NODE_OPTIONS: '--max-semi-space-size=2' }, ['--maglev']);
    expect(maglev).toEqual([process.execPath, '--maglev', '--turbo-filter=~', '--invocation-count-for-feedback-allocation=100', ...idle, BIN, 'start']);
    const count = await startCommandLine({ NODE_OPTIONS: '--max-semi-space-size=2' }, ['--invocation-count-for-feedback-allocation=8']);
    expect(count).toEqual([process.execPath, '--invocation-count-for-feedback-allocation=8', '--turbo-filter=~', '--no-maglev', ...idle, BIN, 'start']);
  }, 90_000);

  it("start runs with glibc's malloc set to one arena and trimming at once, each setting unless set already", async () => {
    const ours = { MALLOC_ARENA_MAX: '1', MALLOC_TRIM_THRESHOLD_: '0', MALLOC_TOP_PAD_: '0' };
    expect(await startMallocEnv()).toEqual(ours);
    expect(await startMallocEnv({ MALLOC_ARENA_MAX: '4' })).toEqual({ ...ours, MALLOC_ARENA_MAX: '4' });
    // Node given every V8 setting itself: the process still starts again, for the environment.
    const v8 = ['--max-semi-space-size=1', '--turbo-filter=~', '--no-maglev', '--invocation-count-for-feedback-allocation=100'];
    const idle = ['--bytecode-old-age=3', '--flush-baseline-code', '--expose-gc-as=__berthCollectGarbage'];
    expect(await startMallocEnv({}, [...v8, ...idle])).toEqual(ours);
    // malloc's settings given as tunables: none added beside them.
    const tunables = { GLIBC_TUNABLES: 'glibc.malloc.arena_max=2' };
    expect(await startMallocEnv(tunables)).toEqual(tunables);
  }, 90_000);

  it('start on docker does not load the Kubernetes runtime or its client, nor fetch', async () => {
    const modules = await startLoads('docker');
    expect(modules.some((m) => /runtime-docker/.test(m))).toBe(true);
    expect(modules.filter((m) => /runtime-kubernetes|client-node/.test(m))).toEqual([]);
    // The Vela client calls the server over node:http; fetch's undici costs an idle worker ~9 MB.
    expect(modules.filter((m) => m.includes('undici'))).toEqual([]);
    // Node modules a worker never uses, each loaded at start-up before (tools/bench/README.md):
    // fs/promises with readline (an `import` of node:fs), node:vm (the idle collection's context),
    // node:zlib (dockerode, prom-client's push gateway), node:worker_threads (pino's transports).
    expect(modules).toContain('node:builtin/http');
    const unused = ['internal/fs/promises', 'internal/readline/interface', 'vm', 'zlib', 'worker_threads'];
    expect(modules.filter((m) => unused.some((u) => m === `node:builtin/${u}`))).toEqual([]);
    // VELA_LOG_FORMAT=json: pino-pretty is not loaded; no config file: no YAML parser, and no
    // pipeline compiler (an idle worker parses nothing; @berth/pipeline has no side effects).
    expect(modules.filter((m) => /\/pino-pretty@/.test(m))).toEqual([]);
    expect(modules.filter((m) => /\/yaml@|\/packages\/pipeline\/(?:dist|src)\/(?:compile|template)\//.test(m))).toEqual([]);
  }, 60_000);
});
