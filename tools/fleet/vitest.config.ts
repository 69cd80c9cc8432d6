import { berthVitestConfig } from '../../vitest.shared.ts';

export const config = berthVitestConfig(import.meta.dirname);
// vitest reads the default export.
// eslint-disable-next-line no-restricted-syntax
export default config;
