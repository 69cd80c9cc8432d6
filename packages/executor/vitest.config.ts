import { berthVitestConfig } from '../../vitest.shared.ts';

// The scenario matrix runs on the real cluster too (test/matrix/runtimes.ts): the test command runs
// it in its cluster lane and the other files in its local lane (BERTH_TEST_LANE).
export const config = berthVitestConfig(import.meta.dirname, {}, { realClusterFiles: ['test/matrix/matrix.test.ts'] });
// vitest reads the default export.
// eslint-disable-next-line no-restricted-syntax
export default config;
