// Shared vitest settings for every workspace package. A package's vitest.config.ts calls
// `berthVitestConfig(import.meta.dirname)`.
//
// - Workspace packages resolve from source through the "@berth/source" export condition,
//   so tests never need a build first.
// - When BERTH_TEST_REPORT_DIR is set (the root test command sets it), each package also
//   writes a machine-readable JSON report there; tools/test.sh sums them into the
//   closing `tests: N passed, N failed` line.
// - A package whose test files are split between the test command's lanes (tools/test.sh) names
//   its real-cluster files (`realClusterFiles`): with BERTH_TEST_LANE=cluster only those run, with
//   BERTH_TEST_LANE=local only the others, each lane writing its own report (`<name>.<lane>.json`).
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { configDefaults, defineConfig, type ViteUserConfig } from 'vitest/config';

const INCLUDE = ['src/**/*.test.ts', 'test/**/*.test.ts'];

/** Options of {@link berthVitestConfig} beside vitest's own. */
export interface BerthVitestOptions {
  /** The package's test files (relative paths) that use the real cluster: see BERTH_TEST_LANE above. */
  realClusterFiles?: string[];
}

export function berthVitestConfig(packageDir: string, overrides: ViteUserConfig['test'] = {}, options: BerthVitestOptions = {}): ViteUserConfig {
  const manifest = JSON.parse(readFileSync(path.join(packageDir, 'package.json'), 'utf8')) as { name: string };
  const reportDir = process.env.BERTH_TEST_REPORT_DIR;
  const lane = options.realClusterFiles === undefined ? undefined : process.env.BERTH_TEST_LANE;
  if (lane !== undefined && lane !== 'cluster' && lane !== 'local') throw new Error(`BERTH_TEST_LANE is "${lane}": use cluster, local, or leave it unset`);
  const laneFiles =
    lane === 'cluster'
      ? { include: options.realClusterFiles, passWithNoTests: true }
      : lane === 'local'
        ? { include: INCLUDE, exclude: [...configDefaults.exclude, ...(options.realClusterFiles ?? [])], passWithNoTests: true }
        : { include: INCLUDE };
  const reportName = manifest.name.replace(/^@/, '').replace(/\//g, '__') + (lane === undefined ? '' : `.${lane}`);
  return defineConfig({
    resolve: { conditions: ['@berth/source'] },
    ssr: { resolve: { conditions: ['@berth/source'] } },
    test: {
      ...laneFiles,
      reporters: reportDir ? ['default', 'json'] : ['default'],
      ...(reportDir ? { outputFile: { json: path.join(reportDir, `${reportName}.json`) } } : {}),
      testTimeout: 30_000,
      hookTimeout: 60_000,
      ...overrides,
    },
  });
}

/** The test files under `dir` (relative to `packageDir`) whose source names `specifier` (an import of it). */
export function testFilesImporting(packageDir: string, dir: string, specifier: string): string[] {
  return readdirSync(path.join(packageDir, dir), { recursive: true, encoding: 'utf8' })
    .filter((file) => file.endsWith('.test.ts') && readFileSync(path.join(packageDir, dir, file), 'utf8').includes(`'${specifier}'`))
    .map((file) => path.posix.join(dir, file.split(path.sep).join('/')))
    .sort();
}
