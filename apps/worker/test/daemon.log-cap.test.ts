// Issue #13 item 4: the log size cap is applied once, by the executor (limit + truncation markers +
// rolling tail); the Vela reporter uploads what it delivers without cutting again. go-vela/worker
// executor/linux/step.go StreamStep stops uploading at executor.max_log_size; Berth keeps the end.
import { randomUUID } from 'node:crypto';
import { type VelaSim } from '@berth/vela-sim';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IMAGE, type WorkerHandle, executable, uniqueRoute, waitForBuildOver, startRegistered, stopRegistered } from './daemon-harness.ts';

const CAP = 4096;
let sim: VelaSim;
let worker: WorkerHandle;
const route = uniqueRoute('cap');

beforeAll(async () => {
  ({ sim, worker } = await startRegistered({ route, env: { VELA_EXECUTOR_MAX_LOG_SIZE: String(CAP) } }));
});

afterAll(() => stopRegistered({ sim, worker }));

describe('VELA_EXECUTOR_MAX_LOG_SIZE (Docker)', { timeout: 90_000 }, () => {
  it('a log over the cap keeps its head, the markers and its last lines, within the cap plus the markers', async () => {
    const repo = `r-${randomUUID().slice(0, 8)}`;
    const yaml = `
version: "1"
steps:
  - name: loud
    image: ${IMAGE}
    pull: never
    commands:
      - seq 1 3000 | sed 's/^/line-/'
      - echo the-error-the-user-needs
`;
    const { build } = await sim.enqueueBuild({ org: 'octo', repo, number: 1, pipeline: executable(yaml, { org: 'octo', repo, number: 1 }), route });
    const id = build.id!;
    await waitForBuildOver(sim, id);
    expect(sim.builds.get(id)!.status).toBe('success');
    const log = sim.stepLog(id, 2)!.toString('utf8');
    expect(log.startsWith('$ seq 1 3000')).toBe(true);
    expect(log).toMatch(/\[berth: this log is over its 4\.0 KiB cap/);
    expect(log).toMatch(/\[berth: log truncated: .* dropped \(cap 4\.0 KiB\); the last .* follow\]/);
    expect(log.endsWith('line-3000\n$ echo the-error-the-user-needs\nthe-error-the-user-needs\n')).toBe(true);
    const markers = (log.match(/\[berth:[^\]]*\]\n?/g) ?? []).join('');
    expect(Buffer.byteLength(log) - Buffer.byteLength(markers)).toBeLessThanOrEqual(CAP);
  });
});
