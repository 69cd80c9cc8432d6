// Shared vitest settings for every workspace package. A package's vitest.config.ts calls
// `berthVitestConfig(import.meta.dirname)`.
//
// - Workspace packages resolve from source through the "@berth/source" export condition,
//   so tests never need a build first.
// - When BERTH_TEST_REPORT_DIR is set (the root test command sets it), each package also
//   writes a machine-readable JSON report there; tools/test.sh sums them into the
//   closing `tests: N passed, N failed` line.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { defineConfig, type ViteUserConfig } from 'vitest/config';

export function berthVitestConfig(packageDir: string, overrides: ViteUserConfig['test'] = {}): ViteUserConfig {
  const manifest = JSON.parse(readFileSync(path.join(packageDir, 'package.json'), 'utf8')) as { name: string };
  const reportDir = process.env.BERTH_TEST_REPORT_DIR;
  const reportName = manifest.name.replace(/^@/, '').replace(/\//g, '__');
  return defineConfig({
    resolve: { conditions: ['@berth/source'] },
    ssr: { resolve: { conditions: ['@berth/source'] } },
    test: {
      include: ['src/**/*.test.ts', 'test/**/*.test.ts'],
      reporters: reportDir ? ['default', 'json'] : ['default'],
      ...(reportDir ? { outputFile: { json: path.join(reportDir, `${reportName}.json`) } } : {}),
      testTimeout: 30_000,
      hookTimeout: 60_000,
      ...overrides,
    },
  });
}
