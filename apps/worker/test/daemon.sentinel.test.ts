// Issue #15 item 4: VELA_QUEUE_CLUSTER=true reaches the queue through Redis Sentinel, with the
// address form go-vela/server's queue/redis/redis.go failoverFromOptions reads. Against a real
// redis-sentinel started by `tools/redis.sh sentinel` (master 127.0.0.1:6391, sentinel :26391).
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { VelaSim } from '@berth/vela-sim';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseSentinelUrl } from '../src/vela/sentinel-url.ts';
import { IMAGE, type WorkerHandle, executable, startWorker, uniqueRoute, waitFor, waitForBuildOver } from './daemon-harness.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
let sim: VelaSim;
let worker: WorkerHandle | undefined;

beforeAll(async () => {
  execFileSync('bash', [path.join(root, 'tools/redis.sh'), 'sentinel'], { stdio: 'ignore' });
  sim = await VelaSim.start({ queueAddr: 'redis://127.0.0.1:6391' });
}, 60_000);

afterAll(async () => {
  await worker?.stop();
  await sim?.close();
});

describe('Redis Sentinel queue (VELA_QUEUE_CLUSTER)', { timeout: 90_000 }, () => {
  it('parses the address as the server does: master first, then the sentinels; :6379 and brackets stripped', () => {
    expect(parseSentinelUrl('redis://:pw@[berth,10.0.0.1:26379,10.0.0.2]:6379/2')).toEqual({
      masterName: 'berth',
      sentinels: [
        { host: '10.0.0.1', port: 26379 },
        { host: '10.0.0.2', port: 26379 },
      ],
      password: 'pw',
      db: 2,
      tls: false,
    });
    expect(parseSentinelUrl('rediss://berth,s1:26380')).toMatchObject({ masterName: 'berth', sentinels: [{ host: 's1', port: 26380 }], db: 0, tls: true });
    expect(() => parseSentinelUrl('redis://[berth]')).toThrow(/names no sentinel/);
  });

  it('pops and runs a build through a real Sentinel', async () => {
    const route = uniqueRoute('sentinel');
    worker = await startWorker(sim, { route, env: { VELA_QUEUE_CLUSTER: 'true', VELA_QUEUE_ADDR: 'redis://[berth,127.0.0.1:26391]' } });
    await waitFor('the worker to register', () => worker!.daemon.registered);
    const repo = `r-${randomUUID().slice(0, 8)}`;
    const yaml = `
version: "1"
steps:
  - name: s
    image: ${IMAGE}
    pull: never
    commands: [ "echo via sentinel" ]
`;
    const { build } = await sim.enqueueBuild({ org: 'octo', repo, number: 1, pipeline: executable(yaml, { org: 'octo', repo, number: 1 }), route });
    await waitForBuildOver(sim, build.id!);
    expect(sim.builds.get(build.id!)?.status).toBe('success');
    expect(sim.stepLog(build.id!, 2)!.toString('utf8')).toContain('via sentinel');
    const ready = (await (await fetch(`${worker.daemon.url}/ready`)).json()) as { checks: { queue: { ok: boolean } } };
    expect(ready.checks.queue.ok).toBe(true);
  });
});
