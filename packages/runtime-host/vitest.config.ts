import { berthVitestConfig } from '../../vitest.shared.ts';

// The conformance suite runs real processes on a busy 2-core machine.
export const config = berthVitestConfig(import.meta.dirname, { testTimeout: 120_000 });
// vitest reads the default export.
// eslint-disable-next-line no-restricted-syntax
export default config;
