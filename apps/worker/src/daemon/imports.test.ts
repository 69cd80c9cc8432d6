// The worker app's modules import each other without cycles (issue #15: the api.ts ↔ daemon.ts
// circle is gone; the API sees the daemon through the WorkerApiHost interface of types.ts).
// Type-only imports count: a cycle of types is still a cycle of concerns.
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { tempDir } from '../../test/temp-dir.ts';

const src = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

function modules(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) return modules(p);
    return e.name.endsWith('.ts') && !e.name.endsWith('.test.ts') ? [p] : [];
  });
}

/** Every cycle of relative imports, each as the list of files (relative to src) around it. */
function importCycles(files: string[]): string[][] {
  const graph = new Map<string, string[]>();
  for (const f of files) {
    const text = readFileSync(f, 'utf8');
    const deps = [...text.matchAll(/^\s*(?:import|export)\b[^'"]*?from\s+['"](\.{1,2}\/[^'"]+)['"]/gm)].map((m) => path.resolve(path.dirname(f), m[1]!));
    graph.set(
      f,
      deps.filter((d) => files.includes(d)),
    );
  }
  const cycles: string[][] = [];
  const state = new Map<string, 'open' | 'done'>();
  const stack: string[] = [];
  const visit = (f: string): void => {
    state.set(f, 'open');
    stack.push(f);
    for (const d of graph.get(f) ?? []) {
      if (state.get(d) === 'open') cycles.push([...stack.slice(stack.indexOf(d)), d].map((x) => path.relative(src, x)));
      else if (!state.has(d)) visit(d);
    }
    stack.pop();
    state.set(f, 'done');
  };
  for (const f of files) if (!state.has(f)) visit(f);
  return cycles;
}

describe('module imports of the worker app', () => {
  it('have no cycle', () => {
    expect(importCycles(modules(src))).toEqual([]);
  });

  it('the check finds a cycle when there is one (as api.ts ↔ daemon.ts was)', () => {
    const dir = tempDir('berth-cycle-');
    const a = path.join(dir, 'daemon.ts');
    const b = path.join(dir, 'api.ts');
    writeFileSync(a, "import { createApi } from './api.ts';\n");
    writeFileSync(b, "import type { Daemon } from './daemon.ts';\n");
    expect(importCycles([a, b])).toHaveLength(1);
    writeFileSync(b, "import type { WorkerApiHost } from './types.ts';\n");
    expect(importCycles([a, b])).toEqual([]);
  });
});
