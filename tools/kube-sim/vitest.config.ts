import { berthVitestConfig } from '../../vitest.shared.ts';

// Pods really run in Docker: on a loaded 2-core machine a test can take a while.
export const config = berthVitestConfig(import.meta.dirname, { testTimeout: 90_000 });
// vitest reads the default export.
// eslint-disable-next-line no-restricted-syntax
export default config;
