// The kubelet's container log rotation and how pods/log serves a follow across it (issue 24,
// item 3 (d)): kubernetes/kubernetes pkg/kubelet/logs/container_log_manager.go (rotateLogs,
// processContainer, rotateLatestLog) and staging cri-client pkg/logs/logs.go (ReadLogs, waitLogs,
// isContainerRunning). A small rotation size and check period keep the test short.

import { type V1Pod } from '@kubernetes/client-node';
import { request } from 'node:https';
import { describe, expect, it } from 'vitest';
import { logRotationPolicy } from '../src/agent/log-rotation.ts';
import { busybox, waitFor, type TestSim, useTestSim } from './helpers.ts';
import { call } from './http.ts';

const ns = 'default';
const MiB = 1024 * 1024;
const stamped = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z) (.*)$/;
/** Lines of phase A: 60 bytes each (100 in the CRI log file), numbered. */
const A_LINES = 100_000;
const B_LINES = 1000;

let t: TestSim;
// Exactly one rotation: phase A's log file (10 MB) reaches the size once, within A or in the
// pause after it, and what is left (under 6 MiB, with phase B) never again. Held by its client,
// the follow is behind by then: A's 9 MB of timestamped lines are more than the sockets buffer.
useTestSim((sim) => (t = sim), { logRotation: { maxSize: 6 * MiB, checkPeriodMs: 1000 } });

function writer(name: string): V1Pod {
  const a = `awk 'BEGIN { for (i = 1; i <= ${A_LINES}; i++) printf "a %07d %s\\n", i, "${'x'.repeat(49)}" }'`;
  const b = `awk 'BEGIN { for (i = 1; i <= ${B_LINES}; i++) printf "b %04d\\n", i }'`;
  return {
    metadata: { name },
    spec: {
      restartPolicy: 'Never',
      terminationGracePeriodSeconds: 1,
      containers: [{ name: 'main', image: busybox, command: ['sh', '-c', `${a}; sleep 8; ${b}`] }],
    },
  };
}

/** A follow whose client does not read until told to: the kubelet's reading is held back (backpressure). */
function heldFollow(sim: TestSim, path: string): { read: () => Promise<{ text: string; clean: boolean }> } {
  const chunks: Buffer[] = [];
  let release: () => void = () => undefined;
  const done = new Promise<{ text: string; clean: boolean }>((resolve) => {
    const req = request(`${sim.sim.url}${path}`, { ca: sim.sim.caCert, headers: { authorization: `Bearer ${sim.sim.token}` } }, (res) => {
      res.pause();
      release = () => res.resume();
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('close', () => resolve({ text: Buffer.concat(chunks).toString('utf8'), clean: res.complete }));
    });
    req.on('error', () => resolve({ text: Buffer.concat(chunks).toString('utf8'), clean: false }));
    req.end();
  });
  return {
    read: () => {
      release();
      return done;
    },
  };
}

/** The content lines of a timestamped log text, and the last timestamp. */
function parse(text: string): { lines: string[]; last: string | undefined } {
  const lines: string[] = [];
  let last: string | undefined;
  for (const l of text.split('\n')) {
    const m = stamped.exec(l);
    if (!m) continue;
    lines.push(m[2] ?? '');
    last = m[1];
  }
  return { lines, last };
}

const expected = [
  ...Array.from({ length: A_LINES }, (_, i) => `a ${String(i + 1).padStart(7, '0')} ${'x'.repeat(49)}`),
  ...Array.from({ length: B_LINES }, (_, i) => `b ${String(i + 1).padStart(4, '0')}`),
];

describe('log rotation (container_log_manager.go) and pods/log across it (cri-client logs.go ReadLogs)', { timeout: 120_000 }, () => {
  it('ends a follow that lags behind a rotation at the old file`s end once the container exited; a resume (sinceTime, timestamps) gets the rest from the current file', async () => {
    await t.core.createNamespacedPod({ namespace: ns, body: writer('rotate-exit') });
    await waitFor(
      'running',
      async () => (await t.core.readNamespacedPod({ namespace: ns, name: 'rotate-exit' })).status?.containerStatuses?.[0]?.state?.running,
    );
    const path = `/api/v1/namespaces/${ns}/pods/rotate-exit/log`;
    const follow = heldFollow(t, `${path}?follow=true&timestamps=true`);
    await waitFor(
      'exited',
      async () => (await t.core.readNamespacedPod({ namespace: ns, name: 'rotate-exit' })).status?.containerStatuses?.[0]?.state?.terminated,
      60_000,
    );
    const first = await follow.read();
    // The kubelet ends the stream cleanly: ReadLogs returns nil once waitLogs finds the container not running.
    expect(first.clean).toBe(true);
    const got = parse(first.text);
    // It read the file it had open to its end (the rotation's cut, within phase A or just after
    // it) and no further: nothing of phase B, written to the new file.
    expect(got.lines.length).toBeGreaterThan(0);
    expect(got.lines.length).toBeLessThanOrEqual(A_LINES);
    expect(got.lines).toEqual(expected.slice(0, got.lines.length));

    // A plain GET reads only the current file: from the rotation's cut to the end, not line 1.
    const current = parse((await call(t.sim, 'GET', `${path}?timestamps=true`)).text).lines;
    expect(current.at(-1)).toBe(`b ${String(B_LINES).padStart(4, '0')}`);
    expect(current[0]).not.toBe(expected[0]);
    expect(current).toEqual(expected.slice(expected.length - current.length));

    // The resume a client makes: sinceTime at the last timestamp it has (the API server passes whole
    // seconds), dropping what it already has by timestamp.
    const resumed = (await call(t.sim, 'GET', `${path}?timestamps=true&sinceTime=${encodeURIComponent(got.last ?? '')}`)).text;
    const rest: string[] = [];
    for (const l of resumed.split('\n')) {
      const m = stamped.exec(l);
      if (m && (m[1] ?? '') > (got.last ?? '')) rest.push(m[2] ?? '');
    }
    const whole = [...got.lines, ...rest];
    console.log(
      `[log-rotation] held follow: ${got.lines.length} lines (to the rotation's cut), current file: ${current.length} lines, resume: ${rest.length} lines; whole: ${whole.length === expected.length}`,
    );
    const stats = t.sim.logRotationStats();
    expect(stats).toMatchObject({ rotations: 1, followsEndedAtRotation: 1, filesSkipped: 0 });
    // One rotation (the only kind this test makes): the follow's file and the current one are adjacent, nothing is lost.
    expect(whole).toEqual(expected);
    await t.core.deleteNamespacedPod({ namespace: ns, name: 'rotate-exit', gracePeriodSeconds: 0 });
  });

  it('measures a running container`s log file by the records written since its last check, not by reading the whole log at every check', async () => {
    // The kubelet stats the file (processContainer: os.Stat, info.Size()); kube-sim counts Docker's
    // records instead, and read them all at every check: a 50 MiB log cost seconds of CPU a check,
    // and on a loaded machine a step exited before its log was ever measured (no rotation).
    const lines = 20_000;
    const before = t.sim.logRotationStats().recordsMeasured;
    await t.core.createNamespacedPod({
      namespace: ns,
      body: {
        metadata: { name: 'measured' },
        spec: {
          restartPolicy: 'Never',
          terminationGracePeriodSeconds: 1,
          containers: [{ name: 'main', image: busybox, command: ['sh', '-c', `awk 'BEGIN { for (i = 1; i <= ${lines}; i++) print "m", i }'; sleep 6`] }],
        },
      },
    });
    await waitFor(
      'exited',
      async () => (await t.core.readNamespacedPod({ namespace: ns, name: 'measured' })).status?.containerStatuses?.[0]?.state?.terminated,
      60_000,
    );
    const read = t.sim.logRotationStats().recordsMeasured - before;
    console.log(`[log-rotation] ${lines} records written, ${read} measured by the size checks`);
    // Each record counted once, however many checks ran while it slept (about six; the old
    // reading counted 31,400 of these 20,000 under load, more on a quiet machine).
    expect(read).toBe(lines);
    await t.core.deleteNamespacedPod({ namespace: ns, name: 'measured', gracePeriodSeconds: 0 });
  });

  it('takes the kubelet`s defaults and checks the policy as NewContainerLogManager does', () => {
    expect(logRotationPolicy(undefined)).toEqual({ maxSize: 10 * MiB, maxFiles: 5, checkPeriodMs: 10_000 });
    expect(logRotationPolicy({ maxSize: -1 })).toBeNull();
    expect(logRotationPolicy(false)).toBeNull();
    expect(() => logRotationPolicy({ maxFiles: 1 })).toThrow('invalid MaxFiles 1, must be > 1');
  });
});
