import { readdirSync } from 'node:fs';
import path from 'node:path';
import { CONTRACT_VERSION } from '@berth/runtime';
import { BUILTIN_RUNTIMES } from './builtin.ts';
import { loadRuntime } from './load.ts';

/** One runtime `berth runtimes` reports. */
export interface RuntimeListing {
  /** What to give `--runtime`. */
  spec: string;
  source: 'builtin' | 'package';
  name?: string;
  version?: string;
  contract?: string;
  description?: string;
  /** Why it cannot be loaded, when it cannot. */
  problem?: string;
}

/** Installed packages named like runtime plugins (`berth-runtime-*`, `@scope/berth-runtime-*`) in `<cwd>/node_modules`. */
function installedPluginNames(cwd: string): string[] {
  const modules = path.join(cwd, 'node_modules');
  const names: string[] = [];
  const list = (dir: string): string[] => {
    try {
      return readdirSync(dir);
    } catch {
      return [];
    }
  };
  for (const entry of list(modules)) {
    if (entry.startsWith('@')) {
      if (entry === '@berth') continue; // the built-ins, listed by name
      for (const inner of list(path.join(modules, entry))) if (inner.startsWith('berth-runtime-')) names.push(`${entry}/${inner}`);
    } else if (entry.startsWith('berth-runtime-')) {
      names.push(entry);
    }
  }
  return names.sort();
}

/**
 * What `--runtime` can load: the built-ins, then plugins installed in the current directory's
 * `node_modules` under a `berth-runtime-*` name, each loaded and checked (a problem is reported,
 * not thrown). Any other package or path can be given to `--runtime` too.
 */
export async function listRuntimes(cwd: string): Promise<RuntimeListing[]> {
  const listings: RuntimeListing[] = [];
  const candidates: [string, RuntimeListing['source'], string?][] = [
    ...BUILTIN_RUNTIMES.map((b): [string, RuntimeListing['source'], string] => [b.name, 'builtin', b.description]),
    ...installedPluginNames(cwd).map((name): [string, RuntimeListing['source']] => [name, 'package']),
  ];
  for (const [spec, source, description] of candidates) {
    try {
      const { descriptor } = await loadRuntime(spec, { cwd });
      listings.push({
        spec,
        source,
        name: descriptor.name,
        version: descriptor.version,
        contract: descriptor.contract,
        ...(description === undefined ? {} : { description }),
      });
    } catch (error) {
      listings.push({ spec, source, problem: (error as Error).message, ...(description === undefined ? {} : { description }) });
    }
  }
  return listings;
}

/** The listing as `berth runtimes` prints it. */
export function formatListing(listings: readonly RuntimeListing[]): string {
  const rows = listings.map((l) => [
    l.spec,
    l.source,
    l.version ?? '-',
    l.contract ?? '-',
    l.problem === undefined ? (l.description ?? `runtime "${l.name ?? l.spec}"`) : `cannot load: ${l.problem}`,
  ]);
  const header = ['RUNTIME', 'SOURCE', 'VERSION', 'CONTRACT', 'WHAT'];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) => cells.map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i] ?? 0))).join('  ');
  return [
    line(header),
    ...rows.map(line),
    '',
    `This worker implements Runtime contract ${CONTRACT_VERSION}; it loads plugins written for contract ${CONTRACT_VERSION.split('.')[0]}.x.`,
    'Also accepted by --runtime: any installed package name, or a path to a plugin module (./my-runtime.js).',
    '',
  ].join('\n');
}
