import { berthVitestConfig } from '../../vitest.shared.ts';

// With BERTH_DUMMY_BROKEN set, only the broken-dummy conformance runs (test/broken-suite.test.ts
// starts them in a child vitest and expects them to fail); they never run in the normal totals.
export const config = berthVitestConfig(import.meta.dirname, process.env.BERTH_DUMMY_BROKEN ? { include: ['test/broken/*.conformance.ts'] } : {});
// vitest reads the default export.
// eslint-disable-next-line no-restricted-syntax
export default config;
