#!/usr/bin/env node
// The `berth` command. Runs the compiled, bundled worker (dist/bundle/, made by `pnpm build`)
// when it is there and fresh, else the TypeScript sources on Node 24 (bin/entry.js decides;
// `berth --build-info` says which and why). From source in the repository, workspace packages resolve from their
// sources too, through the "@berth/source" export condition added here by a resolve hook;
// compiled, or installed (the worker image), they run from their dist/.
// Built-in modules are taken as `require` takes them, not imported: Node's ES module view of a
// built-in reads every export on first import, and node:fs's `promises` getter loads fs/promises,
// readline and the REPL's history (~1 MB of every `berth` process, the worker's included).
const { existsSync, readFileSync } = process.getBuiltinModule('node:fs');
const { enableCompileCache, registerHooks } = process.getBuiltinModule('node:module');
const { fileURLToPath, pathToFileURL } = process.getBuiltinModule('node:url');

const [major] = process.versions.node.split('.').map(Number);
if (major < 24) {
  process.stderr.write(
    `berth needs Node.js 24 or newer; this is ${process.version}.\n` +
      'Run `bash tools/bootstrap.sh` and `source tools/env.sh` in the Berth checkout to use the project-local Node 24.\n',
  );
  process.exit(2);
}

// `berth --version` answers before anything else loads: scripts and health checks call it
// often, and it should cost what `docker --version` costs, not a TypeScript load of the tree.
const args = process.argv.slice(2);
if (args.length === 1 && (args[0] === '--version' || args[0] === '-V')) {
  const { version } = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));
  process.stdout.write(`${version}\n`);
  process.exit(0);
}

// `berth start` runs with these V8 settings (apps/worker/README.md):
// - the young generation bounded to 1 MB semi-spaces, as the image and the systemd unit set it
//   through NODE_OPTIONS: V8 grows them to 16 MB while the worker loads, which was most of what
//   the daemon's peak exceeded its idle memory by;
// - no optimizing compiler (neither TurboFan nor Maglev), and feedback (inline caches) with
//   Sparkplug's baseline code only for functions called 100 times (V8: 8): V8 interprets the
//   code that runs while the worker starts and for each build, and compiles its hot paths (the
//   log stream's) to baseline code. An optimizing compiler's first compilation, of any function,
//   makes its own code in the `node` binary resident for the life of the process (TurboFan's
//   ~5 MB, Maglev's ~1.5 MB), and the code and feedback of every function called a few times
//   stay in the heap: together ~6 MB of an idle worker (a tenth of its budget), while the
//   worker's hot path is mostly Node's native code (tools/bench/README.md: its figures);
// - the bytecode and baseline code of functions that have not run for 3 full collections (V8: 6;
//   baseline code: never) dropped, to be compiled again when called: what only start-up and a
//   build's set-up ran leaves the heap once the worker is idle (its idle collection runs several):
//   ~0.6 MB less, the CPU over five builds the same;
// - V8's collection function exposed under a name of its own, for the daemon's memory-reducing
//   collection when idle (src/daemon/memory.ts, EXPOSED_GC), rather than fetched from a context
//   made for it (node:vm): ~0.6 MB less. That collection runs twice (four full collections), so
//   the code only the last build ran is dropped when the worker becomes idle: ~0.9 MB less after
//   five builds.
// V8 reads them only when Node starts, so the process replaces itself once (process.execve: the
// same pid, descriptors and environment, with START_ENV below) with those that Node's own options
// do not set already.
const START_FLAGS = [
  { flag: '--max-semi-space-size=1', given: /--(?:max|min)-semi-space-size/ },
  { flag: '--turbo-filter=~', given: /--turbo-filter/ },
  { flag: '--no-maglev', given: /--(?:no-)?maglev(?![-\w])/ },
  { flag: '--invocation-count-for-feedback-allocation=100', given: /--invocation-count-for-feedback-allocation/ },
  { flag: '--bytecode-old-age=3', given: /--bytecode-old-age/ },
  { flag: '--flush-baseline-code', given: /--(?:no-)?flush-baseline-code/ },
  { flag: '--expose-gc-as=__berthCollectGarbage', given: /--expose-gc/ },
];
// glibc's malloc reads its settings from the environment when the process starts, so the same
// re-execution sets them, each unless set already (and none when GLIBC_TUNABLES sets malloc's):
// - one arena for all threads (MALLOC_ARENA_MAX=1; glibc: 8 per core), V8's and libuv's threads
//   included, whose allocations are few and short;
// - free memory at the top of the heap given back to the system at once (MALLOC_TRIM_THRESHOLD_=0,
//   glibc: 128 KB, growing up to 32 MB after a large block was freed) and no extra kept when it
//   grows (MALLOC_TOP_PAD_=0, glibc: 128 KB): what a build allocated and freed leaves the process.
// An idle worker ~1 MB less before and after its builds, its peak ~1 MB lower, the CPU over five
// builds and the executor's log path the same (tools/bench/README.md). The processes the worker
// starts inherit them. (A fixed mmap threshold of 32 KB saved 0.4 MB more but cost the log path
// ~30 % more CPU: each 64 KB socket read became an mmap and an munmap.)
const START_ENV = { MALLOC_ARENA_MAX: '1', MALLOC_TRIM_THRESHOLD_: '0', MALLOC_TOP_PAD_: '0' };
if (args[0] === 'start' && typeof process.execve === 'function') {
  const given = `${process.env.NODE_OPTIONS ?? ''} ${process.execArgv.join(' ')}`;
  const missing = START_FLAGS.filter((f) => !f.given.test(given)).map((f) => f.flag);
  const tuned = /glibc\.malloc\./.test(process.env.GLIBC_TUNABLES ?? '');
  const env = tuned ? [] : Object.entries(START_ENV).filter(([name]) => process.env[name] === undefined);
  if (missing.length > 0 || env.length > 0)
    process.execve(process.execPath, [process.execPath, ...process.execArgv, ...missing, ...process.argv.slice(1)], {
      ...process.env,
      ...Object.fromEntries(env),
    });
}

// V8's compiled code for the modules loaded below is kept on disk (in the system's temporary
// folder, by Node's rules; NODE_DISABLE_COMPILE_CACHE=1 turns it off): a start after the first
// skips most of parsing and compiling, about a third of `berth exec`'s time to its first container.
enableCompileCache();

const inWorkspace = existsSync(new URL('../../../pnpm-workspace.yaml', import.meta.url));
const { chooseEntry } = await import('./entry.js');
const entry = chooseEntry({ appDir: fileURLToPath(new URL('..', import.meta.url)), inWorkspace, env: process.env });
if (args.length === 1 && args[0] === '--build-info') {
  process.stdout.write(`${entry.mode}: ${entry.reason}\n`);
  process.exit(0);
}
if (inWorkspace && entry.mode === 'source')
  registerHooks({
    resolve(specifier, context, nextResolve) {
      return nextResolve(specifier, { ...context, conditions: [...context.conditions, '@berth/source'] });
    },
  });

// The bundle (compiled mode) has its own stand-ins for these (bin/bundle.js).
if (entry.mode === 'source') (await import('./lazy-deps.js')).loadDockerExtrasLazily();

const { main } = await import(pathToFileURL(entry.main).href);
const code = await main(process.argv);
process.exitCode = code;
// Everything a command opened is closed by now; should a handle still hold the process, do not hang.
setTimeout(() => {
  process.stderr.write('berth: a resource was still open 10 s after the command finished; exiting anyway\n');
  process.exit(code);
}, 10_000).unref();
