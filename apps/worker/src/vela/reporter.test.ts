import { randomUUID } from 'node:crypto';
import { background } from '@berth/context';
import type { Target } from '@berth/executor';
import { VelaSim } from '@berth/vela-sim';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { VelaClient } from './client.ts';
import { WholeLogUploader } from './log-upload.ts';
import { type ReportedBuild, VelaReporter } from './reporter.ts';

let sim: VelaSim;
beforeAll(async () => {
  sim = await VelaSim.start();
});
afterAll(async () => {
  await sim.close();
});

const pipeline = {
  version: '1',
  services: [{ name: 'db', image: 'postgres:16', number: 1 }],
  steps: [
    { name: 'init', image: '#init', number: 1 },
    { name: 'test', image: 'alpine:3', number: 2 },
  ],
};

const tick = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function claimed(): Promise<{ reporterFor: () => VelaReporter; build: ReportedBuild; id: number; repo: string }> {
  const repo = `rep-${randomUUID().slice(0, 8)}`;
  const { build } = await sim.enqueueBuild({ org: 'octo', repo, pipeline, noPush: true });
  const token = sim.mintToken('WorkerBuild', 'w1', 600, { build_id: build.id!, repo: `octo/${repo}` });
  const client = new VelaClient({ address: sim.url, token, timeoutMs: 15_000, retry: { baseDelayMs: 20, maxDelayMs: 200 } });
  const b = { ...build, number: build.number!, repo: { ...build.repo, org: 'octo', name: repo } };
  return { build: b, id: build.id!, repo, reporterFor: (o = {}) => new VelaReporter({ client, build: b, ...o }) };
}

const step2: Target = { kind: 'step', name: 'test', number: 2, id: 'step_octo_x_1_test', image: 'alpine:3' };

describe('VelaReporter', () => {
  it('PUTs build, step and service statuses in Vela shapes (seconds, host, runtime)', async () => {
    const { reporterFor, id } = await claimed();
    const r = reporterFor();
    const ctx = background();
    await r.buildStatus(ctx, { id: 'octo_x_1', status: 'running', started: 1_700_000_000_500, runtime: 'docker', host: 'w1', distribution: 'linux' });
    expect(sim.builds.get(id)).toMatchObject({ status: 'running', started: 1_700_000_000, host: 'w1', runtime: 'docker', distribution: 'linux' });
    expect(r.build.status).toBe('running');
    await r.stepStatus(ctx, { ...step2, status: 'running', exitCode: 0, started: 1_700_000_001_000, detached: false, continueOnFailure: false });
    await r.stepStatus(ctx, {
      ...step2,
      status: 'failure',
      exitCode: 3,
      started: 1_700_000_001_000,
      finished: 1_700_000_009_999,
      detached: false,
      continueOnFailure: false,
    });
    expect(sim.stepsOf(id).find((s) => s.number === 2)).toMatchObject({
      status: 'failure',
      exit_code: 3,
      started: 1_700_000_001,
      finished: 1_700_000_009,
      host: 'w1',
      runtime: 'docker',
    });
    await r.stepStatus(ctx, {
      kind: 'service',
      name: 'db',
      number: 1,
      id: 'service_octo_x_1_db',
      image: 'postgres:16',
      status: 'success',
      exitCode: 0,
      detached: true,
      continueOnFailure: false,
    });
    expect(sim.servicesOf(id)[0]).toMatchObject({ status: 'success' });
    // A synthesized init step (number 0) is unknown to the server: nothing is sent.
    const before = sim.calls.length;
    await r.stepStatus(ctx, {
      kind: 'init',
      name: 'init',
      number: 0,
      id: 'init',
      image: '#init',
      status: 'success',
      exitCode: 0,
      detached: false,
      continueOnFailure: false,
    });
    expect(sim.calls.length).toBe(before);
    await r.buildStatus(ctx, {
      id: 'octo_x_1',
      status: 'failure',
      started: 1_700_000_000_500,
      finished: 1_700_000_010_000,
      runtime: 'docker',
      host: 'w1',
      distribution: 'linux',
    });
    expect(sim.builds.get(id)).toMatchObject({ status: 'failure', finished: 1_700_000_010 });
  });

  // Issue #26 item 2: W internal/step/upload.go Upload reports a step it never ran `killed`, 137,
  // started = finished; go-vela/ui src/elm/Vela.elm toStatus reads `skipped` as Error.
  it('sends a ruleset-skipped step as go-vela/worker does: killed, exit code 137, started = finished', async () => {
    const { reporterFor, id } = await claimed();
    const r = reporterFor();
    const ctx = background();
    await r.stepStatus(ctx, { ...step2, status: 'skipped', exitCode: 0, finished: 1_700_000_020_400, detached: false, continueOnFailure: false });
    expect(sim.stepsOf(id).find((s) => s.number === 2)).toMatchObject({ status: 'killed', exit_code: 137, started: 1_700_000_020, finished: 1_700_000_020 });
    const before = Date.now();
    await r.stepStatus(ctx, { ...step2, status: 'skipped', exitCode: 0, detached: false, continueOnFailure: false });
    const step = sim.stepsOf(id).find((s) => s.number === 2)!;
    expect(step).toMatchObject({ status: 'killed', exit_code: 137 });
    expect(step.started).toBe(step.finished);
    expect(step.started).toBeGreaterThanOrEqual(Math.floor(before / 1000));
  });

  /** Numbered lines, so a reordering or a duplicate would show. */
  function tenMiB(): Buffer {
    const lines: string[] = [];
    for (let i = 0, size = 0; size < 10 * 1024 * 1024; i++) {
      const line = `${String(i).padStart(8, '0')} ${'x'.repeat(80 + (i % 40))}\n`;
      lines.push(line);
      size += line.length;
    }
    return Buffer.from(lines.join('')).subarray(0, 10 * 1024 * 1024);
  }

  async function upload10MiB(faults: { atChunk: number; kind: 'status' | 'non-json'; times?: number }[], failFinal: boolean) {
    const { reporterFor, id, repo } = await claimed();
    const r = reporterFor();
    const ctx = background();
    const logPath = `/api/v1/repos/octo/${repo}/builds/*/steps/2/logs`;
    const input = tenMiB();
    const chunk = 64 * 1024;
    for (let off = 0, n = 0; off < input.length; off += chunk, n++) {
      for (const f of faults)
        if (f.atChunk === n) sim.fail({ method: 'PUT', path: logPath, kind: f.kind, status: f.kind === 'status' ? 500 : 502, times: f.times ?? 1 });
      await r.appendLog(ctx, step2, input.subarray(off, off + chunk));
      await tick(3);
    }
    if (failFinal) sim.fail({ method: 'PUT', path: logPath, kind: 'status', status: 503 });
    await r.closeLog(ctx, step2);
    const stored = sim.stepLog(id, 2)!;
    const puts = sim.callsTo('PUT', logPath);
    const sent = puts.reduce((n, c) => n + (c.logDataBytes ?? 0), 0);
    const failed = puts.filter((c) => c.status !== 200).length;
    const stats = r.uploadStats().get('step:2')!;
    const ratio = sent / input.length;
    console.log(`10 MiB log: ${puts.length} uploads (${failed} failed, ${stats.finalFailures} of them final), ${sent} bytes sent, ratio ${ratio.toFixed(3)}`);
    return { input, stored, sent, failed, stats, ratio };
  }

  it('uploads a 10 MiB log whole, once, in order, despite failed PUTs, sending under 3x its size (plus one log per failed final PUT)', async () => {
    const { input, stored, sent, failed, stats, ratio } = await upload10MiB(
      [
        { atChunk: 0, kind: 'status', times: 2 },
        { atChunk: 2, kind: 'non-json' },
        { atChunk: 60, kind: 'status' },
      ],
      false,
    );
    expect(stored.length).toBe(input.length);
    expect(stored.equals(input)).toBe(true);
    expect(failed).toBe(4);
    expect(stats).toMatchObject({ logBytes: input.length, sentBytes: sent, complete: true });
    // The uploader's bound: (budget 1.5 + 1) x size + 256 KiB slack, plus one log per failed final attempt.
    expect(sent).toBeLessThanOrEqual(2.5 * input.length + 256 * 1024 + stats.finalFailures * input.length);
    expect(ratio).toBeLessThan(3 + stats.finalFailures);
  });

  it('a failed final upload is retried and costs one more log', async () => {
    const { input, stored, sent, stats } = await upload10MiB([{ atChunk: 0, kind: 'status' }], true);
    expect(stored.equals(input)).toBe(true);
    expect(stats.finalFailures).toBe(1);
    expect(sent).toBeLessThanOrEqual(3.5 * input.length + 256 * 1024);
  });

  it('uploads what the executor delivers without cutting it again (its cap already applied), and services log to their own route', async () => {
    const { reporterFor, id } = await claimed();
    const r = reporterFor();
    const ctx = background();
    const svc: Target = { kind: 'service', name: 'db', number: 1, id: 'service_db', image: 'postgres:16' };
    await r.appendLog(ctx, svc, Buffer.alloc(700, 'a'));
    await r.appendLog(ctx, svc, Buffer.alloc(700, 'b'));
    await r.closeLog(ctx, svc);
    expect(sim.serviceLog(id, 1)?.toString()).toBe('a'.repeat(700) + 'b'.repeat(700));
    expect(r.uploadStats().get('service:1')).toMatchObject({ logBytes: 1400, droppedBytes: 0, complete: true });
  });
});

describe('WholeLogUploader', () => {
  it('uploads a slowly growing small log live, on the interval', async () => {
    const seen: number[] = [];
    const up = new WholeLogUploader({ intervalMs: 50, upload: (_c, log) => (seen.push(log.length), Promise.resolve()) });
    const ctx = background();
    for (let i = 0; i < 10; i++) {
      up.append(ctx, Buffer.from('line\n'));
      await tick(30);
    }
    await up.finish(ctx);
    expect(seen.at(-1)).toBe(50);
    // More than the first and the final upload: the interval kicked in while the log grew.
    expect(seen.length).toBeGreaterThan(2);
    expect([...seen].sort((a, b) => a - b)).toEqual(seen);
  });

  it('bounds the bytes sent even when every non-final upload fails', async () => {
    let sent = 0;
    let calls = 0;
    const up = new WholeLogUploader({
      intervalMs: 1,
      slackBytes: 0,
      upload: (_c, log, final) => {
        calls += 1;
        sent += log.length;
        return final ? Promise.resolve() : Promise.reject(new Error('boom'));
      },
    });
    const ctx = background();
    const size = 4 * 1024 * 1024;
    for (let off = 0; off < size; off += 16 * 1024) {
      up.append(ctx, Buffer.alloc(16 * 1024, 1));
      await tick(1);
    }
    await up.finish(ctx);
    expect(up.stats()).toMatchObject({ logBytes: size, complete: true });
    expect(calls).toBeGreaterThan(2);
    expect(sent / size).toBeLessThanOrEqual(2.5 + 1e-9);
  });
});
