import { berthVitestConfig } from '../../vitest.shared.ts';

// --expose-gc: the many-children test bounds heap growth after forcing a collection.
export const config = berthVitestConfig(import.meta.dirname, { execArgv: ['--expose-gc'] });
// vitest reads the default export.
// eslint-disable-next-line no-restricted-syntax
export default config;
