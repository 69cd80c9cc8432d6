// No byte lost when the kubelet rotates a log (issue 24, item 5), on the real cluster with the
// kubelet's default rotation (containerLogMaxSize 10Mi, checked every 10 s). A step writes 50 MiB
// and exits, as the conformance suite's large-log case does; the rotation can fall as it exits,
// when the kubelet's follow ends on the old file (kubernetes/kubernetes staging cri-client
// pkg/logs/logs.go ReadLogs / waitLogs) and a new request reads only the current one. Before
// TimestampedLines carried a partial line across streams, most runs lost 28–48 bytes (the last,
// newline-less line). Runs go one after another, as the conformance case runs, until
// ROTATED_RUNS_WANTED (ROTATION_ROTATED_RUNS, default 3) of them were rotated while read, at most
// ROTATION_RUNS (default 20): about half the runs rotate while read, so the test command's run
// takes about 6 runs (~3 min) where a fixed 20 took 12 min. ROTATION_ROTATED_RUNS=20 runs all 20.
//
// What no client can avoid: the kubelet serves only the current log file. A follow that ends
// (or is cut) before it reached the end of a file the kubelet has since rotated, or that is more
// than one rotated file behind when the kubelet rotates twice (ReadLogs reopens the path on the new
// file's Create event), cannot get the rest of that file from any API. On a loaded machine that
// happens (here: 14 MB of one run at load 20); such a loss is a file's tail, kilobytes to
// megabytes. Berth's own loss was a line's start: tens of bytes. So a run must be whole or short
// by at least LINE_LOSS_LIMIT (reported with the rotated files seen in the node's pod log
// directory, this machine being the node); and some run must have been rotated while read.
// A run whose log file on the node does not end as the step's output does lost its tail in the
// container runtime, before any API (test/log-completeness-real.test.ts): reported, not Berth's.
import { createHash } from 'node:crypto';
import { expect, it } from 'vitest';
import { background, withTimeout } from '@berth/context';
import { realCluster } from '@berth/kube-cluster';
import { conformanceBuild, conformanceStep, setupBuildResources, teardownBuild } from '@berth/runtime-conformance';
import type { KubernetesRuntime } from '../src/index.ts';
import { containerNameOf, podNameOf } from '../src/pod-spec.ts';
import { aloneSkip, BUSYBOX, useRealRuntime } from './helpers.ts';
import { nodeLog } from './node-log.ts';

const RUNS = Number(process.env.ROTATION_RUNS ?? 20);
const ROTATED_RUNS_WANTED = Number(process.env.ROTATION_ROTATED_RUNS ?? 3);
const BYTES = 50 * 1024 * 1024;
const PATTERN = 'berth rotation 0123456789abcdefghijklmnopqrstuvwxyz';
/** More than any one line of the log (PATTERN and a newline): a loss this small is a line's, not a file's. */
const LINE_LOSS_LIMIT = 4096;
const cluster = realCluster();
// Twenty 50 MiB logs saturate the one kubelet's log serving: this file runs alone, after the other
// lanes (the test command sets BERTH_REAL_CLUSTER_ALONE=1 for it), so that neither disturbs the other.
const skip = aloneSkip(cluster.skip, 'it runs alone on the real cluster');

/** sha256 of what the step writes: PATTERN lines, cut at BYTES (the last line has no newline). */
function expectedDigest(): string {
  const line = Buffer.from(`${PATTERN}\n`);
  const hash = createHash('sha256');
  const block = Buffer.concat(Array.from({ length: 1024 }, () => line));
  let left = BYTES;
  while (left > 0) {
    const piece = block.subarray(0, Math.min(left, block.length));
    hash.update(piece);
    left -= piece.length;
  }
  return hash.digest('hex');
}

const runtimeOf = useRealRuntime(skip === undefined ? cluster.kubeconfig : undefined, 'rotation');

/** The last 200 bytes the step writes. */
function expectedTail(): string {
  const line = `${PATTERN}\n`;
  return (line.repeat(8) + line.slice(0, BYTES % line.length)).slice(-200);
}

/**
 * One build of one step writing the log; returns how many bytes arrived, their digest, the
 * rotations seen, and whether the log file on the node ends as the step's output does (when it
 * does not, the container runtime lost the output's tail before any API could serve it: see
 * test/log-completeness-real.test.ts).
 */
async function oneRun(rt: KubernetesRuntime): Promise<{ bytes: number; digest: string; exitCode: number; rotated: number; nodeWhole: boolean }> {
  const [ctx, cancel] = withTimeout(background(), 150_000);
  const build = conformanceBuild();
  const step = conformanceStep(build, 'big', 1, { image: BUSYBOX, script: [`yes '${PATTERN}' | head -c ${BYTES}`] });
  build.steps = [step];
  try {
    await setupBuildResources(ctx, rt, build);
    await rt.runContainer(ctx, step, build);
    const hash = createHash('sha256');
    let bytes = 0;
    const stream = await rt.tailContainer(ctx, step);
    const reading = (async () => {
      for await (const chunk of stream) {
        hash.update(chunk as Buffer);
        bytes += (chunk as Buffer).length;
      }
    })();
    const [exit] = await Promise.all([rt.waitContainer(ctx, step), reading]);
    const node = nodeLog('default', podNameOf(build.id), containerNameOf(step.id));
    const tail = expectedTail();
    const nodeWhole =
      node === undefined ||
      Buffer.concat([node.lastRotated.subarray(-tail.length), node.content])
        .toString('latin1')
        .endsWith(tail);
    return { bytes, digest: hash.digest('hex'), exitCode: exit.exitCode, rotated: node?.rotated ?? 0, nodeWhole };
  } finally {
    await teardownBuild(ctx, rt, build).catch(() => undefined);
    cancel();
  }
}

it.skipIf(skip !== undefined)(
  `runs of a 50 MiB log with the kubelet's default rotation until ${ROTATED_RUNS_WANTED} were rotated while read (at most ${RUNS}): no line cut at a rotation, on the real cluster${skip === undefined ? '' : ` [skipped: ${skip}]`}`,
  { timeout: RUNS * 60_000 },
  async () => {
    const rt = runtimeOf();
    const want = expectedDigest();
    const short: string[] = [];
    const kubeletSkips: string[] = [];
    const runtimeLost: string[] = [];
    let rotatedRuns = 0;
    let runs = 0;
    for (let run = 1; run <= RUNS && rotatedRuns < ROTATED_RUNS_WANTED; run++) {
      runs = run;
      const r = await oneRun(rt);
      expect(r.exitCode).toBe(0);
      if (r.rotated > 0) rotatedRuns++;
      if (r.bytes === BYTES && r.digest === want) continue;
      const what = `run ${run}: ${r.bytes} of ${BYTES} bytes${r.bytes === BYTES ? ', content differs' : ''} (${r.rotated} rotated files)`;
      if (!r.nodeWhole) runtimeLost.push(what);
      else (r.bytes <= BYTES - LINE_LOSS_LIMIT ? kubeletSkips : short).push(what);
    }
    console.log(
      `[log-rotation] ${runs} runs of 50 MiB on the real kubelet: ${runs - short.length - kubeletSkips.length - runtimeLost.length} whole, ${rotatedRuns} rotated while read; ` +
        `${short.length} short by part of a line; ${kubeletSkips.length} short by a rotated file's tail the kubelet no longer serves${kubeletSkips.length > 0 ? ` (${kubeletSkips.join('; ')})` : ''}; ` +
        `${runtimeLost.length} whose output's tail the container runtime lost before the node's file${runtimeLost.length > 0 ? ` (${runtimeLost.join('; ')})` : ''}`,
    );
    // Berth's own loss — a run short by part of a line while the node's file is whole — must be
    // none. Before TimestampedLines carried a partial line over, 5 runs in 6 lost a line's start;
    // the runs short by part of a line seen since (44 and 172 bytes, about 1 in 10 beside other
    // lanes) were counted before the node's file was looked at, and the container runtime's loss
    // of an output's tail at exit (test/log-completeness-real.test.ts) looks just like that.
    expect(short, short.join('; ')).toEqual([]);
    expect(rotatedRuns, 'no run was rotated while it was read: the case proved nothing').toBeGreaterThan(0);
  },
);
