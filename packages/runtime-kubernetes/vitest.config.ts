import { berthVitestConfig, testFilesImporting } from '../../vitest.shared.ts';

// The files that import @berth/kube-cluster run on the real cluster: the test command runs them in
// its cluster lane and the others (kube-sim, fakes) in its local lane (BERTH_TEST_LANE).
export const config = berthVitestConfig(import.meta.dirname, {}, { realClusterFiles: testFilesImporting(import.meta.dirname, 'test', '@berth/kube-cluster') });
// vitest reads the default export.
// eslint-disable-next-line no-restricted-syntax
export default config;
