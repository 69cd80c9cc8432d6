// Every examples/*.yml with `berth exec --runtime kubernetes` against kube-sim (the Kubernetes API
// test double whose pods run in Docker), compared with the same example on Docker (issue 14): the
// build succeeds, leaves no pod, and takes no more than a few seconds longer than on Docker.
import { execFileSync } from 'node:child_process';
import { copyFileSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { type KubeSim, startKubeSim } from '@berth/kube-sim';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kubeSimPodNames, type ProcessRun, spawnBerth } from './run-cli.ts';
import { tempDir } from './temp-dir.ts';

const EXAMPLES = path.join(import.meta.dirname, '../../../examples');
const PAUSE = process.env.BERTH_PAUSE_IMAGE ?? 'berth/pause:1';
const IMAGE = process.env.BERTH_BUSYBOX_IMAGE ?? 'berth/busybox:1.35';

/** Extra arguments an example needs (its header comment says how to run it). */
const EXTRA_ARGS: Record<string, string[]> = { 'secrets.yml': ['--secret', 'api_token=s3cr3t-t0ken'] };
/**
 * Examples the kubernetes runtime refuses, with what it says: outputs need the runtime's optional
 * `outputs` capability, which it does not offer (as Vela's Kubernetes runtime).
 */
const REFUSED: Record<string, RegExp> = {
  'outputs.yml': /step "use" \(image "berth\/busybox:\$\{TAG\}" needs \$\{TAG\}\).*the kubernetes runtime does not offer outputs/,
};

let kube: KubeSim;
let startCostMs = 0;
beforeAll(async () => {
  kube = await startKubeSim();
  // What one container start costs on this machine's Docker engine: kube-sim starts every container
  // of a pod once more, on the pause image, plus the pod's sandbox.
  const started = performance.now();
  const id = execFileSync('docker', ['create', '--network', 'none', IMAGE, 'true'], { encoding: 'utf8' }).trim();
  execFileSync('docker', ['start', '-a', id]);
  execFileSync('docker', ['rm', '-f', id]);
  startCostMs = performance.now() - started;
}, 120_000);
afterAll(async () => {
  await kube?.close();
});

function podNames(): Promise<string[]> {
  return kubeSimPodNames(kube);
}

type Run = ProcessRun;

function berth(args: string[], cwd: string, env: NodeJS.ProcessEnv = {}): Promise<Run> {
  return spawnBerth(['exec', ...args], cwd, env);
}

/**
 * Runs the Docker reference once no other run's network of the same build id has been seen for 2 s
 * (at most 120 s of waiting): other `berth exec` runs on a shared engine use the same name.
 */
async function dockerReference(args: string[], copy: () => string): Promise<Run> {
  let clearSince = performance.now();
  for (let waited = 0; waited < 120_000; waited += 250) {
    const networks = execFileSync('docker', ['network', 'ls', '-q', '--filter', 'name=^localOrg_localRepo_1$'], { encoding: 'utf8' }).trim();
    if (networks !== '') clearSince = performance.now();
    else if (performance.now() - clearSince >= 2_000) break;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  return berth(args, copy());
}

const examples = readdirSync(EXAMPLES)
  .filter((file) => file.endsWith('.yml'))
  .sort();

describe('every example with berth exec --runtime kubernetes (against kube-sim) vs Docker', { timeout: 600_000 }, () => {
  it('finds the examples', () => {
    expect(examples.length).toBeGreaterThanOrEqual(4);
  });

  it.each(examples)('%s: succeeds (or is refused as REFUSED says), leaves no pod, and takes at most a few seconds longer than on Docker', async (file) => {
    // Each run gets a copy in a directory of its own: on Docker the current directory is the workspace.
    const copy = (): string => {
      const dir = tempDir('berth-k8s-example-');
      copyFileSync(path.join(EXAMPLES, file), path.join(dir, file));
      return dir;
    };
    const args = [file, ...(EXTRA_ARGS[file] ?? [])];
    // Docker is the reference. Its engine is shared with other test runs that use the same build id
    // (berth exec names the network localOrg_localRepo_1): wait until no such network exists, and
    // retry a reference run that failed (at most twice), saying why.
    let docker = await dockerReference(args, copy);
    for (let attempt = 2; docker.code !== 0 && attempt <= 3; attempt++) {
      console.log(`${file}: the Docker reference run failed (exit ${docker.code}), retrying:\n${docker.stdout.slice(-1_000)}${docker.stderr.slice(-1_000)}`);
      docker = await dockerReference(args, copy);
    }
    const kubernetes = await berth(['--runtime', 'kubernetes', '--kubeconfig', kube.kubeconfigPath, ...args], copy(), { BERTH_KUBERNETES_PAUSE_IMAGE: PAUSE });
    // The bound: the Docker run, plus one more container start per container of the pod and one for
    // its sandbox (measured above), plus 5 s for what only the Kubernetes runtime does (the first
    // list of its two watches, the image patch per step, the pod's deletion).
    const containers = (readFileSync(path.join(EXAMPLES, file), 'utf8').match(/^\s+image:/gm) ?? []).length;
    const allowanceMs = 5_000 + (containers + 1) * startCostMs;
    console.log(
      `${file}: docker ${(docker.ms / 1000).toFixed(1)} s, kubernetes ${(kubernetes.ms / 1000).toFixed(1)} s ` +
        `(bound ${((docker.ms + allowanceMs) / 1000).toFixed(1)} s: ${containers} containers, ${Math.round(startCostMs)} ms per container start)`,
    );
    expect(docker.code, docker.stdout + docker.stderr).toBe(0);
    const refused = REFUSED[file];
    if (refused !== undefined) {
      // Refused at the build's start, before any step ran.
      expect(kubernetes.code, kubernetes.stdout + kubernetes.stderr).toBe(1);
      expect(kubernetes.stdout + kubernetes.stderr).toMatch(refused);
      expect(await podNames(), 'no pod left').toEqual([]);
      return;
    }
    expect(kubernetes.code, kubernetes.stdout + kubernetes.stderr).toBe(0);
    expect(kubernetes.stdout + kubernetes.stderr).not.toContain('deadline passed');
    expect(kubernetes.stdout).toMatch(/build \S+ ✓ success/);
    expect(await podNames(), 'no pod left').toEqual([]);
    expect(kubernetes.ms, 'no more than a few seconds longer than on Docker').toBeLessThanOrEqual(docker.ms + allowanceMs);
  });
});
