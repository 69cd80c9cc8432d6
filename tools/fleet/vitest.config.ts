import { berthVitestConfig } from '../../vitest.shared.ts';

// The fleet's cases run at the same time, FLEET_CONCURRENCY (default 3) at once: each waits mostly
// on sleeping builds in its own namespace, and three fleets of 2–3 replicas fit the one node.
export const config = berthVitestConfig(import.meta.dirname, { maxConcurrency: Number(process.env.FLEET_CONCURRENCY ?? 3) });
// vitest reads the default export.
// eslint-disable-next-line no-restricted-syntax
export default config;
