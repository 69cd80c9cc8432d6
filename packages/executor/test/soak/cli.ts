/**
 * `pnpm --filter @berth/executor soak`: the seeded fault soak on the dummy runtime (or Docker
 * with SOAK_RUNTIME=docker). SOAK_SEED picks the seed (random by default, printed), SOAK_N the
 * number of builds (500), SOAK_ONLY one build to replay, SOAK_MULTILINE=0 no multi-line secrets,
 * SOAK_KNOWN_BUGS=0 without never-ending log streams. Exits 1 on any violation.
 */
import { soak } from './soak.ts';
import { dockerTarget, dummyTarget } from './targets.ts';

function intEnv(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isSafeInteger(value) || value < 0) {
    console.error(`soak: ${name}=${raw} is not a non-negative integer`);
    process.exit(2);
  }
  return value;
}

const seed = intEnv('SOAK_SEED', Math.floor(Math.random() * 2 ** 31));
const n = intEnv('SOAK_N', 500);
const only = process.env.SOAK_ONLY === undefined ? undefined : intEnv('SOAK_ONLY', 0);
const target = process.env.SOAK_RUNTIME === 'docker' ? await dockerTarget() : await dummyTarget();
console.log(`soak: seed ${seed}, ${only === undefined ? `${n} builds` : `build ${only} only`} on ${target.name}`);
try {
  const result = await soak(target, {
    seed,
    n,
    ...(only === undefined ? {} : { only }),
    knownBugs: process.env.SOAK_KNOWN_BUGS !== '0',
    print: (line) => console.log(line),
  });
  console.log(`statuses: ${JSON.stringify(result.statuses)}; faults: ${JSON.stringify(result.faults)}`);
  console.log(result.summary);
  process.exitCode = result.violations.length === 0 ? 0 : 1;
} finally {
  await target.close();
}
