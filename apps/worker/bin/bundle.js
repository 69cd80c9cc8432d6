// The worker's build script runs this after `tsc`: it bundles the compiled worker (dist/main.js)
// and everything it imports — the workspace packages' dist/, zod, yaml, commander, dockerode, the
// daemon's server and queue client — into dist/bundle/, a few chunks that `berth` loads instead of
// ~900 files. One file per command path means no module resolution at start-up and no unused code
// parsed: zod's 40 locales and most of its API are left out, dockerode's BuildKit session and
// docker-modem's SSH transport stay on disk until first used. `berth exec` reaches its first
// container in about half the time (tools/bench startup).
//
// Each command's code is its own chunk (main.ts imports them dynamically), so `berth validate`
// still loads no executor and `berth exec` no daemon. Each chunk's source map points at the
// compiled files it was made of (dist/ of the app and of each package, which ship too).
import { rmSync } from 'node:fs';
import { createRequire, isBuiltin } from 'node:module';
import path from 'node:path';
import { rolldown } from 'rolldown';
import { LAZY_MODULES } from './lazy-deps.js';

const APP = path.resolve(import.meta.dirname, '..');

const LAZY_PREFIX = '\0berth-lazy:';
const BUILTIN_PREFIX = '\0berth-builtin:';

/** The stand-in: one function forwarding every call to the real module, found when first called. */
function standIn({ from, file }) {
  return `'use strict';
const { createRequire } = require('node:module');
const path = require('node:path');
let real;
function load() {
  // The installed chain ${from.join(' → ')}, followed from this file, as Node would resolve it.
  let at = require.resolve(${JSON.stringify(from[0] + '/package.json')});
  for (const name of ${JSON.stringify(from.slice(1))}) at = createRequire(at).resolve(name + '/package.json');
  return require(path.join(path.dirname(at), ${JSON.stringify(file)}));
}
module.exports = function lazy(...args) {
  real ??= load();
  return real.apply(this, args);
};
`;
}

/**
 * Built-in modules the bundle takes on first use rather than at load: node:tls (and node:https,
 * which loads it) set up OpenSSL's TLS side, ~3 MB of an idle worker's memory, yet a worker whose
 * Vela server, Redis and Docker engine are plain HTTP, TCP and a unix socket never opens a TLS
 * connection. ioredis, docker-modem and the Docker runtime take them at load and use them only to
 * connect. node:zlib: dockerode takes it at load to gzip an image's build context (buildImage),
 * which Berth never calls.
 */
export const LAZY_BUILTINS = ['node:tls', 'node:https', 'node:zlib'];

/**
 * A lazy built-in's stand-in: an object with the module's export names (as this Node has them),
 * whose every read, write or call goes to the real module, loaded on the first one. The names let
 * rolldown's ES interop copy the exports (as getters) without touching them.
 */
function lazyBuiltin(id) {
  const names = Object.keys(process.getBuiltinModule(id));
  return `'use strict';
let real;
const load = () => (real ??= process.getBuiltinModule(${JSON.stringify(id)}));
const names = {};
for (const name of ${JSON.stringify(names)}) names[name] = undefined;
const standIn = new Proxy(names, {
  get: (_, name) => load()[name],
  // An object inheriting from the module (docker-modem's http.js) gets the property as its own.
  set: (_, name, value, receiver) =>
    receiver === standIn ? Reflect.set(load(), name, value) : Reflect.defineProperty(receiver, name, { value, writable: true, enumerable: true, configurable: true }),
  has: (_, name) => name in load(),
});
module.exports = standIn;
`;
}

/**
 * Parts of bundled libraries that a worker never uses, initialized on first use instead of when
 * the library loads: each `require` below is moved into the getter (or function) that hands the
 * module out, so rolldown initializes the module there. Each is an exact piece of the library's
 * code; should an update change it, the build stops and names it (check the library, then update
 * or drop the entry). What each saved an idle worker is in tools/bench/README.md.
 */
export const LAZY_REQUIRES = [
  {
    // The push gateway (and with it node:zlib, which it takes at load): Berth is scraped.
    file: '/prom-client/index.js',
    from: "exports.Pushgateway = require('./lib/pushgateway');",
    to: "Object.defineProperty(exports, 'Pushgateway', { enumerable: true, get: () => require('./lib/pushgateway') });",
  },
  {
    // @opentelemetry/api, read only for exemplars, which Berth's metrics do not enable.
    file: '/prom-client/lib/metrics/processCpuTotal.js',
    from: "const OtelApi = require('@opentelemetry/api');",
    to: "const OtelApi = { get trace() { return require('@opentelemetry/api').trace; }, get context() { return require('@opentelemetry/api').context; } };",
  },
  {
    // Redis Cluster support (and node:dns, which its options take at load): Berth's queue is one
    // Redis server.
    file: '/ioredis/built/index.js',
    from: 'var cluster_1 = require("./cluster");',
    to: 'var cluster_1 = { get default() { return require("./cluster").default; } };',
  },
  {
    file: '/ioredis/built/Redis.js',
    from: 'const cluster_1 = require("./cluster");',
    to: 'const cluster_1 = { get default() { return require("./cluster").default; } };',
  },
  {
    file: '/ioredis/built/Redis.js',
    from: 'Redis.Cluster = cluster_1.default;',
    to: 'Object.defineProperty(Redis, "Cluster", { configurable: true, enumerable: true, get: () => cluster_1.default, set(value) { Object.defineProperty(Redis, "Cluster", { value, writable: true, configurable: true, enumerable: true }); } });',
  },
  {
    // pino's transports (thread-stream, and node:worker_threads, which it takes at load): Berth
    // logs to its stderr.
    file: '/pino/pino.js',
    from: "module.exports.transport = require('./lib/transport')",
    to: "module.exports.transport = function transport (...args) { return require('./lib/transport')(...args) }",
  },
  {
    file: '/pino/lib/tools.js',
    from: "const transport = require('./transport')",
    to: "function transport (...args) { return require('./transport')(...args) }",
  },
  {
    // ... and node:worker_threads, read when pino opens a file of its own (pino.destination).
    file: '/pino/lib/tools.js',
    from: "const { isMainThread } = require('worker_threads')",
    to: "const workerThreads = { get isMainThread () { return require('worker_threads').isMainThread } }",
  },
  {
    file: '/pino/lib/tools.js',
    from: '!opts.sync && isMainThread',
    to: '!opts.sync && workerThreads.isMainThread',
  },
];

/** `process.getBuiltinModule('node:tls')` (and the other lazy ones) in the bundled code. */
const LAZY_BUILTIN_CALL = new RegExp(`process\\.getBuiltinModule\\((['"])(${LAZY_BUILTINS.join('|')})\\1\\)`, 'g');

/**
 * `createRequire(import.meta.url)('../package.json')` reads a package's version next to its
 * module; bundled, the module is no longer there, so the version is filled in at build time.
 */
const VERSION_READ = /createRequire\(import\.meta\.url\)\((['"])\.\.\/package\.json\1\)/g;

/**
 * Bundles `input` (the compiled worker by default) into `outDir` (dist/bundle/), ES modules with
 * source maps. The output must sit inside the app (or a folder that resolves its packages the
 * same way): the stand-ins find the real modules through its node_modules.
 */
export async function bundle({ input = path.join(APP, 'dist/main.js'), outDir = path.join(APP, 'dist/bundle') } = {}) {
  const build = await rolldown({
    input: { main: input },
    platform: 'node',
    logLevel: 'warn',
    // Nothing the bundle leaves out is needed at start-up: these are the stand-ins' real modules'
    // dependencies, with native parts that cannot be bundled.
    external: [/^(ssh2|cpu-features|@grpc\/|protobufjs)(\/|$)/],
    plugins: [
      {
        // The modules loaded on first use (as from source): their stand-in resolves the real
        // module at run time from the installed package, so neither it nor its dependencies
        // (gRPC, protobufjs, ssh2 and its native parts) are bundled.
        name: 'berth-lazy-modules',
        resolveId(specifier, importer) {
          const lazy = LAZY_MODULES.find((l) => l.specifier === specifier && importer?.endsWith(l.parent));
          return lazy ? LAZY_PREFIX + LAZY_MODULES.indexOf(lazy) : null;
        },
        load(id) {
          return id.startsWith(LAZY_PREFIX) ? { code: standIn(LAZY_MODULES[Number(id.slice(LAZY_PREFIX.length))]), moduleType: 'js' } : null;
        },
      },
      {
        // Built-in modules are taken as `require` takes them (process.getBuiltinModule), imported
        // or required. Node's ES module view of a built-in reads every export on first import, and
        // some are costly getters: node:http's WebSocket ones load undici (fetch, ~30 ms and
        // ~14 MB), node:process's allowedNodeEnvironmentFlags builds a set of every Node option
        // (~15 ms), node:util's and node:tls's take 10-20 ms. rolldown also turns CommonJS
        // `require('http')` into such an import. node:module stays an import: the bundle's own
        // runtime needs it first.
        name: 'berth-builtins',
        resolveId(specifier) {
          if (!isBuiltin(specifier)) return null;
          const id = specifier.startsWith('node:') ? specifier : `node:${specifier}`;
          return id === 'node:module' ? { id, external: true } : BUILTIN_PREFIX + id;
        },
        load(id) {
          if (!id.startsWith(BUILTIN_PREFIX)) return null;
          const builtin = id.slice(BUILTIN_PREFIX.length);
          if (LAZY_BUILTINS.includes(builtin)) return { code: lazyBuiltin(builtin), moduleType: 'js' };
          return { code: `module.exports = process.getBuiltinModule(${JSON.stringify(builtin)});\n`, moduleType: 'js' };
        },
      },
      {
        // Code that calls process.getBuiltinModule itself for a lazy built-in gets the stand-in.
        name: 'berth-lazy-builtin-calls',
        transform(code, id) {
          // Only in ES modules (the workspace's packages): an import is added.
          if (id.startsWith('\0') || code.search(LAZY_BUILTIN_CALL) < 0 || !/^(?:import|export)\s/m.test(code)) return null;
          const used = new Set();
          const replaced = code.replace(LAZY_BUILTIN_CALL, (_, _quote, builtin) => {
            used.add(builtin);
            return `__berth_lazy_${builtin.slice('node:'.length)}`;
          });
          // Appended (imports are hoisted): the lines and columns of the code stay where they were.
          const imports = [...used].map((b) => `import __berth_lazy_${b.slice('node:'.length)} from ${JSON.stringify(b)};`).join('');
          return { code: `${replaced}\n${imports}\n`, map: null };
        },
      },
      {
        name: 'berth-lazy-requires',
        transform(code, id) {
          const entries = LAZY_REQUIRES.filter((l) => id.endsWith(l.file));
          if (entries.length === 0) return null;
          let replaced = code;
          for (const { from, to } of entries) {
            if (replaced.split(from).length !== 2)
              throw new Error(`bin/bundle.js: ${id} changed: \`${from}\` is not there once; check what LAZY_REQUIRES defers in it and update the entry`);
            replaced = replaced.replace(from, () => to);
          }
          return { code: replaced, map: null };
        },
      },
      {
        // docker-modem formats every request's options with util.inspect (showHidden, no depth
        // limit) for its debug log even when that log is off: ~5 ms per engine call, a container's
        // whole create request included. Formatted only when DEBUG=modem turns the log on.
        name: 'berth-docker-modem-debug',
        transform(code, id) {
          if (!id.endsWith('/docker-modem/lib/modem.js')) return null;
          const replaced = code.replace("debug('Sending: %s', util.inspect(", "debug.enabled && debug('Sending: %s', util.inspect(");
          if (replaced === code) throw new Error(`bin/bundle.js: docker-modem changed (${id}); check its request debug log and update this plugin`);
          return { code: replaced, map: null };
        },
      },
      {
        name: 'berth-package-versions',
        transform(code, id) {
          if (id.startsWith('\0') || code.search(VERSION_READ) < 0) return null;
          const { version } = createRequire(id)('../package.json');
          return { code: code.replace(VERSION_READ, () => `(${JSON.stringify({ version })})`), map: null };
        },
      },
    ],
  });
  try {
    rmSync(outDir, { recursive: true, force: true });
    await build.write({
      dir: outDir,
      format: 'esm',
      sourcemap: true,
      // Local names shortened (functions and classes keep theirs, for stack traces and for code
      // that reads them): V8 holds each loaded chunk's source in the heap for as long as the
      // process runs, 1.3 MB of it in an idle worker before, 1.0 MB now (~0.35 MB less resident).
      // Not compressed: rewriting the code itself buys little more and changes what runs.
      minify: { compress: false, mangle: { keepNames: true }, codegen: { removeWhitespace: true } },
      // Non-ASCII characters in strings and regular expressions are escaped: V8 holds a chunk's
      // source as one byte per character only if every character fits in Latin-1; a single "→"
      // doubles the chunk's size in the heap (the daemon's 0.55 MB chunk took 1.1 MB).
      charset: 'ascii',
      entryFileNames: '[name].js',
      chunkFileNames: '[name]-[hash].js',
    });
  } finally {
    await build.close();
  }
}

if (import.meta.main) await bundle();
