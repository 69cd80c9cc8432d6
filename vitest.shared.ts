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
//   BERTH_TEST_LANE=local only the others, each lane writing its own report (`<name>.<lane>.json`);
//   BERTH_TEST_LANE=alone is the cluster lane's files again, for the cases run alone after it.
// - BERTH_TEST_WORKERS, when set, is how many of a package's test files run at once (vitest's
//   maxWorkers; its default is one less than the cores, so 1 on a 2-core machine). The test command
//   sets it for its local lane: those files mostly wait on Docker, kube-sim and child processes.
import { mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { configDefaults, defineConfig, type ViteUserConfig } from 'vitest/config';
import type { Reporter, TestModule } from 'vitest/node';

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
  if (lane !== undefined && lane !== 'cluster' && lane !== 'local' && lane !== 'alone')
    throw new Error(`BERTH_TEST_LANE is "${lane}": use cluster, local, alone, or leave it unset`);
  const laneFiles =
    lane === 'cluster' || lane === 'alone'
      ? { include: options.realClusterFiles, passWithNoTests: true }
      : lane === 'local'
        ? { include: INCLUDE, exclude: [...configDefaults.exclude, ...(options.realClusterFiles ?? [])], passWithNoTests: true }
        : { include: INCLUDE };
  const workers = process.env.BERTH_TEST_WORKERS;
  if (workers !== undefined && workers !== '' && !/^[1-9][0-9]*$/.test(workers))
    throw new Error(`BERTH_TEST_WORKERS is "${workers}": use a whole number of test files at once (1 or more), or leave it unset`);
  const reportName = manifest.name.replace(/^@/, '').replace(/\//g, '__') + (lane === undefined ? '' : `.${lane}`);
  return defineConfig({
    resolve: { conditions: ['@berth/source'] },
    ssr: { resolve: { conditions: ['@berth/source'] } },
    test: {
      ...laneFiles,
      reporters: reportDir ? ['default', 'json', new FileTimes(path.join(reportDir, `${reportName}.files.json`))] : ['default'],
      ...(reportDir ? { outputFile: { json: path.join(reportDir, `${reportName}.json`) } } : {}),
      testTimeout: 30_000,
      hookTimeout: 60_000,
      ...(workers ? { maxWorkers: Number(workers) } : {}),
      ...overrides,
    },
  });
}

/**
 * Writes each test file's whole time (import, hooks and tests, wall clock) to `<name>.files.json`,
 * for the summary's slowest files: vitest's JSON report spans only a file's first test to its
 * last, without its imports and beforeAll/afterAll.
 */
class FileTimes implements Reporter {
  readonly #out: string;
  readonly #started = new Map<string, number>();
  readonly #files: { name: string; ms: number }[] = [];

  constructor(out: string) {
    this.#out = out;
  }

  onTestModuleStart(testModule: TestModule): void {
    this.#started.set(testModule.moduleId, Date.now());
  }

  onTestModuleEnd(testModule: TestModule): void {
    const d = testModule.diagnostic();
    const started = this.#started.get(testModule.moduleId) ?? Date.now();
    const before = d.environmentSetupDuration + d.prepareDuration + d.collectDuration + d.setupDuration;
    this.#files.push({ name: testModule.moduleId, ms: Math.round(before + Date.now() - started) });
  }

  onTestRunEnd(): void {
    mkdirSync(path.dirname(this.#out), { recursive: true });
    writeFileSync(this.#out, JSON.stringify(this.#files));
  }
}

/** The test files under `dir` (relative to `packageDir`) whose source names `specifier` (an import of it). */
export function testFilesImporting(packageDir: string, dir: string, specifier: string): string[] {
  return readdirSync(path.join(packageDir, dir), { recursive: true, encoding: 'utf8' })
    .filter((file) => file.endsWith('.test.ts') && readFileSync(path.join(packageDir, dir, file), 'utf8').includes(`'${specifier}'`))
    .map((file) => path.posix.join(dir, file.split(path.sep).join('/')))
    .sort();
}
