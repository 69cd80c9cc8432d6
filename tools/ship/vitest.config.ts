import { berthVitestConfig } from '../../vitest.shared.ts';

// One file at a time: both build the workspace packages (turbo) before they pack or deploy them.
export const config = berthVitestConfig(import.meta.dirname, { fileParallelism: false });
// vitest reads the default export.
// eslint-disable-next-line no-restricted-syntax
export default config;
