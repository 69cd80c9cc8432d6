/**
 * The seeded fault soak on the local Docker engine with the fixed seed of the test command:
 * 30 builds of real containers, each checked against issue #13's invariants (see soak.test.ts).
 */
import { describe, expect, it } from 'vitest';
import { soak } from './soak.ts';
import { dockerTarget } from './targets.ts';

const SEED = 20261203;

describe('the soak on Docker, fixed seed', () => {
  it('30 builds on the local engine: no invariant broken', { timeout: 600_000 }, async () => {
    const target = await dockerTarget();
    try {
      const result = await soak(target, { seed: SEED, n: 30, knownBugs: true, print: (line) => console.log(line) });
      console.log(result.summary);
      expect(result.violations.map((v) => v.message)).toEqual([]);
      expect(result.endAfterCancel.length).toBeGreaterThan(2);
      expect(Object.keys(result.statuses)).toEqual(expect.arrayContaining(['success', 'error', 'canceled']));
    } finally {
      await target.close();
    }
  });
});
