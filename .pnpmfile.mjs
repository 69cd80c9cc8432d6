// pnpm hooks of the workspace (pnpm reads this file by default).
//
// beforePacking: what `pnpm pack` / `pnpm publish` writes into a tarball's package.json. A
// published manifest must not name a package nobody can install: the workspace's private
// packages (the test doubles tools/kube-sim and tools/vela-sim, the private tools) are dropped from
// devDependencies — they are only needed to run the package's own tests in this repository.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

const ROOT = import.meta.dirname;

/** The names of the workspace's private packages (packages/*, apps/*, tools/*). */
function privatePackages() {
  const names = new Set();
  for (const group of ['packages', 'apps', 'tools']) {
    let entries = [];
    try {
      entries = readdirSync(path.join(ROOT, group), { withFileTypes: true });
    } catch {
      continue;
    }
    for (const entry of entries) {
      if (!entry.isDirectory()) continue;
      try {
        const manifest = JSON.parse(readFileSync(path.join(ROOT, group, entry.name, 'package.json'), 'utf8'));
        if (manifest.private) names.add(manifest.name);
      } catch {
        // not a package
      }
    }
  }
  return names;
}

function beforePacking(pkg) {
  if (!pkg.devDependencies) return pkg;
  const hidden = privatePackages();
  const devDependencies = Object.fromEntries(Object.entries(pkg.devDependencies).filter(([name]) => !hidden.has(name)));
  return { ...pkg, devDependencies };
}

export const hooks = { beforePacking };
