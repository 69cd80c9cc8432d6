// Which code the `berth` command runs: the compiled and bundled JavaScript in dist/bundle/ when it
// is there and not older than the sources it was built from, else the TypeScript sources (Node 24 strips their
// types on the fly: no build step for contributors, at the cost of start-up time and ~30 MB).
// Plain JavaScript on purpose: it runs before anything is compiled or stripped.
// Built-ins as `require` takes them: an `import` of node:fs would load fs/promises (bin/berth.js).
const { existsSync, readdirSync, readFileSync, realpathSync, statSync, writeFileSync } = process.getBuiltinModule('node:fs');
const path = process.getBuiltinModule('node:path');

/** The file a build writes last; its mtime is the build's time. */
const STAMP = 'dist/.build-stamp';

/**
 * @typedef {object} Entry
 * @property {'compiled' | 'source'} mode
 * @property {string} main    the module to import: dist/bundle/main.js or src/main.ts
 * @property {string} reason  why this mode, for `berth --build-info`
 */

/**
 * Chooses compiled or source. `appDir` is apps/worker; `inWorkspace` says whether it sits in the
 * Berth repository (sources may have changed since the build) rather than an installation.
 * Compiled needs dist/bundle/main.js (bin/bundle.js), the build stamp, and in the workspace: no source file of the app
 * or of a workspace package it depends on newer than the stamp, and each such package built.
 * `BERTH_FROM_SOURCE=1` forces source.
 *
 * @param {{ appDir: string, inWorkspace: boolean, env: Record<string, string | undefined> }} options
 * @returns {Entry}
 */
export function chooseEntry({ appDir: given, inWorkspace, env }) {
  const appDir = path.resolve(given);
  const source = (reason) => ({ mode: 'source', main: path.join(appDir, 'src/main.ts'), reason });
  if (env.BERTH_FROM_SOURCE && env.BERTH_FROM_SOURCE !== '0') return source('BERTH_FROM_SOURCE is set');
  const main = path.join(appDir, 'dist/bundle/main.js');
  const stamp = path.join(appDir, STAMP);
  if (!existsSync(main) || !existsSync(stamp)) return source('no compiled build (`pnpm build` makes one)');
  if (inWorkspace) {
    const built = statSync(stamp).mtimeMs;
    for (const dir of workspacePackages(appDir)) {
      if (dir !== appDir && !existsSync(path.join(dir, 'dist/index.js'))) return source(`${path.basename(dir)} has no dist/ (\`pnpm build\` makes it)`);
      const newer = newerFile(path.join(dir, 'src'), built);
      if (newer) return source(`${path.relative(path.dirname(path.dirname(appDir)), newer)} changed after the last build (\`pnpm build\` again)`);
    }
  }
  // The reason is formatted only when read (`berth --build-info`): V8 reads the host's time zone
  // names for the first Date formatted in a process, even in UTC (~1.2 MB of ICU's data and code).
  const builtMs = statSync(stamp).mtimeMs;
  return {
    mode: 'compiled',
    main,
    get reason() {
      return `built ${new Date(builtMs).toISOString()}`;
    },
  };
}

/**
 * The app's folder and those of every workspace package it depends on, directly or not: the
 * `@berth/*` dependencies, followed through their node_modules links.
 *
 * @param {string} appDir
 * @returns {string[]}
 */
export function workspacePackages(given) {
  const appDir = path.resolve(given);
  const seen = new Set([appDir]);
  const queue = [appDir];
  while (queue.length > 0) {
    const dir = /** @type {string} */ (queue.shift());
    const manifest = JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8'));
    for (const name of Object.keys(manifest.dependencies ?? {})) {
      if (!name.startsWith('@berth/')) continue;
      let target;
      try {
        target = realpathSync(path.join(dir, 'node_modules', name));
      } catch {
        continue;
      }
      if (target.includes(`${path.sep}node_modules${path.sep}`) || seen.has(target)) continue;
      seen.add(target);
      queue.push(target);
    }
  }
  return [...seen];
}

/**
 * The first file under `dir` modified after `since` (ms), or undefined. Tests are skipped: they
 * are not compiled.
 *
 * @param {string} dir
 * @param {number} since
 * @returns {string | undefined}
 */
function newerFile(dir, since) {
  // A walk by hand: readdirSync's recursive mode and path.join cost more than the stats here,
  // and this runs on every start in a checkout.
  let entries;
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch {
    return undefined;
  }
  for (const entry of entries) {
    const file = `${dir}${path.sep}${entry.name}`;
    if (entry.isDirectory()) {
      const newer = newerFile(file, since);
      if (newer) return newer;
    } else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.test.ts') && statSync(file).mtimeMs > since) return file;
  }
  return undefined;
}

/**
 * Writes the build stamp (the build script's last step): compiled code is used from now on,
 * until a source file changes.
 *
 * @param {string} appDir
 */
export function writeBuildStamp(appDir) {
  writeFileSync(path.join(appDir, STAMP), `${new Date().toISOString()}\n`);
}
