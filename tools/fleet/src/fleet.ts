/**
 * A fleet of Berth workers in the real cluster (tools/kube-cluster), deployed as an operator
 * deploys them: the repository's manifests (apps/worker/deploy/kubernetes) through the
 * `host-network` overlay, plus a kustomization of the operator's own (namespace, image, the Vela
 * server's address, the queue route, the pause image) — nothing else differs from what users get.
 *
 * The cluster has no volume provisioner, so the StatefulSet's state claims bind to static hostPath
 * volumes made here (one per ordinal, owned by the image's user 10001), as an operator of such a
 * cluster would make them.
 */
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { chownSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
const ROOT = path.resolve(import.meta.dirname, '../../..');
/** The overlay an operator of a cluster without kube-proxy applies (see apps/worker/deploy/README.md). */
const OVERLAY = path.join(ROOT, 'apps/worker/deploy/host-network');
/** Where the static state volumes live on the node. */
const STATE_ROOT = process.env.BERTH_FLEET_STATE_ROOT ?? '/var/lib/berth-fleet';
/** The worker image's user (apps/worker/deploy/docker/Dockerfile). */
const WORKER_UID = 10001;

/** What a fleet runs against. */
export interface FleetOptions {
  /** The kubeconfig file of the real cluster. */
  kubeconfig: string;
  /** The Vela server's address (vela-sim's URL) and shared secret. */
  serverAddr: string;
  serverSecret: string;
  /** The queue route every replica pops. */
  route: string;
  replicas: number;
  /** Most replicas this fleet will be scaled to (one state volume each). Default: `replicas`. */
  maxReplicas?: number;
  /** The worker image in the cluster's containerd. Default `BERTH_WORKER_IMAGE` or `berth/worker:dev`. */
  image?: string;
  /** The namespace prefix; a random suffix is added. Default `berth-fleet`. */
  namespacePrefix?: string;
  /**
   * The overlay's BERTH_API_PORT_BASE: replica N's API listens on the node at base + N. Default: a
   * random base from 20000 up to the node's ephemeral ports (ip_local_port_range; a port in that
   * range may be any connection's local port), one no other fleet of this process holds and whose
   * ports are free now, so that fleets in several namespaces of one node do not collide.
   */
  portBase?: number;
  /** Extra worker environment (VELA_BUILD_LIMIT, BERTH_DRAIN_GRACE, …). */
  env?: Record<string, string>;
}

/** A pod as `kubectl get pods -o json` lists it (the fields read here). */
interface PodJson {
  metadata: { name: string; uid: string; labels?: Record<string, string>; deletionTimestamp?: string };
  status: { phase?: string; containerStatuses?: Array<{ ready: boolean; restartCount: number }> };
}

/** A deployed fleet: one namespace of the real cluster, its StatefulSet and its state volumes. */
export class Fleet {
  readonly namespace: string;
  /** Replica N's API port on the node is `portBase + N`. */
  readonly portBase: number;
  readonly #options: FleetOptions;
  readonly #dir: string;
  readonly #volumes: string[] = [];

  private constructor(options: FleetOptions, portBase: number) {
    this.#options = options;
    this.namespace = `${options.namespacePrefix ?? 'berth-fleet'}-${randomUUID().slice(0, 6)}`;
    this.portBase = portBase;
    this.#dir = mkdtempSync(path.join(tmpdir(), 'berth-fleet-'));
  }

  /** Creates the namespace, state volumes and secret, applies the manifests and waits for the rollout. */
  static async deploy(options: FleetOptions): Promise<Fleet> {
    const fleet = new Fleet(options, options.portBase ?? (await freePortBase(Math.max(options.maxReplicas ?? options.replicas, options.replicas))));
    try {
      await fleet.#apply();
      await fleet.rolloutStatus();
    } catch (e) {
      await fleet.describe().then(
        (d) => process.stderr.write(`${d}\n`),
        () => undefined,
      );
      await fleet.destroy();
      throw e;
    }
    return fleet;
  }

  /** `kubectl` on the real cluster; rejects with its stderr. */
  async kubectl(args: string[], timeoutMs = 120_000): Promise<string> {
    try {
      const { stdout } = await run('kubectl', ['--kubeconfig', this.#options.kubeconfig, ...args], { timeout: timeoutMs, maxBuffer: 64 << 20 });
      return stdout;
    } catch (e) {
      const err = e as Error & { stderr?: string };
      throw new Error(`kubectl ${args.join(' ')}: ${err.stderr?.trim() || err.message}`, { cause: e });
    }
  }

  /** `kubectl -n <namespace> …` */
  async k(...args: string[]): Promise<string> {
    return this.kubectl(['-n', this.namespace, ...args]);
  }

  async #apply(): Promise<void> {
    const o = this.#options;
    const max = Math.max(o.maxReplicas ?? o.replicas, o.replicas);
    await this.kubectl(['create', 'namespace', this.namespace]);
    const volumes: unknown[] = [];
    for (let i = 0; i < max; i++) {
      const dir = path.join(STATE_ROOT, this.namespace, String(i));
      mkdirSync(dir, { recursive: true, mode: 0o700 });
      chownSync(dir, WORKER_UID, WORKER_UID);
      const name = `${this.namespace}-state-${i}`;
      this.#volumes.push(name);
      volumes.push({
        apiVersion: 'v1',
        kind: 'PersistentVolume',
        metadata: { name, labels: { 'berth.dev/fleet': this.namespace } },
        spec: {
          capacity: { storage: '64Mi' },
          accessModes: ['ReadWriteOnce'],
          persistentVolumeReclaimPolicy: 'Retain',
          hostPath: { path: dir, type: 'Directory' },
          claimRef: { namespace: this.namespace, name: `state-berth-worker-${i}` },
        },
      });
    }
    writeFileSync(path.join(this.#dir, 'volumes.json'), JSON.stringify({ apiVersion: 'v1', kind: 'List', items: volumes }));
    await this.kubectl(['apply', '-f', path.join(this.#dir, 'volumes.json')]);
    await this.k('create', 'secret', 'generic', 'berth-worker', `--from-literal=server-secret=${o.serverSecret}`);
    const image = o.image ?? process.env.BERTH_WORKER_IMAGE ?? 'berth/worker:dev';
    const [imageName, imageTag = 'latest'] = splitImage(image);
    const env = {
      VELA_SERVER_ADDR: o.serverAddr,
      VELA_QUEUE_ROUTES: o.route,
      BERTH_KUBERNETES_PAUSE_IMAGE: process.env.BERTH_PAUSE_IMAGE ?? 'berth/pause:1',
      BERTH_API_PORT_BASE: String(this.portBase),
      ...o.env,
    };
    // The operator's own kustomization: the repository's overlay plus this cluster's settings.
    const kustomization = {
      apiVersion: 'kustomize.config.k8s.io/v1beta1',
      kind: 'Kustomization',
      namespace: this.namespace,
      resources: [path.relative(this.#dir, OVERLAY)],
      images: [{ name: 'registry.example.com/berth/worker', newName: imageName, newTag: imageTag }],
      replicas: [{ name: 'berth-worker', count: o.replicas }],
      patches: [
        {
          target: { kind: 'StatefulSet', name: 'berth-worker' },
          patch: JSON.stringify({
            apiVersion: 'apps/v1',
            kind: 'StatefulSet',
            metadata: { name: 'berth-worker' },
            spec: {
              template: {
                spec: { containers: [{ name: 'worker', env: Object.entries(env).map(([name, value]) => ({ name, value })) }] },
              },
            },
          }),
        },
      ],
    };
    writeFileSync(path.join(this.#dir, 'kustomization.yaml'), JSON.stringify(kustomization, null, 2));
    await this.kubectl(['apply', '-k', this.#dir]);
  }

  /** Waits for `kubectl rollout status` of the StatefulSet. */
  async rolloutStatus(timeoutS = 180): Promise<string> {
    return this.kubectl(['-n', this.namespace, 'rollout', 'status', 'statefulset/berth-worker', `--timeout=${timeoutS}s`], (timeoutS + 10) * 1000);
  }

  /** `kubectl scale --replicas=n`. */
  async scale(replicas: number): Promise<void> {
    await this.k('scale', 'statefulset/berth-worker', `--replicas=${replicas}`);
  }

  /** The namespace's pods. */
  async pods(): Promise<PodJson[]> {
    return (JSON.parse(await this.k('get', 'pods', '-o', 'json')) as { items: PodJson[] }).items;
  }

  /** The worker pods (the StatefulSet's). */
  async workers(): Promise<PodJson[]> {
    return (await this.pods()).filter((p) => p.metadata.labels?.['app.kubernetes.io/name'] === 'berth-worker');
  }

  /** The build pods (every pod of the namespace that is not a worker). */
  async buildPods(): Promise<PodJson[]> {
    return (await this.pods()).filter((p) => p.metadata.labels?.['app.kubernetes.io/name'] !== 'berth-worker');
  }

  /** GET `path` of a worker's API from inside its pod (`kubectl exec … wget`). */
  async fromPod(ordinal: number, apiPath: string): Promise<string> {
    return this.k('exec', `berth-worker-${ordinal}`, '-c', 'worker', '--', 'wget', '-q', '-O', '-', `http://127.0.0.1:${this.portBase + ordinal}${apiPath}`);
  }

  /**
   * SIGKILL of replica `ordinal`'s worker process, from the node (the pods share its process table
   * view through /proc; a signal from inside the pod cannot kill its PID 1). The kubelet restarts
   * the container in the same pod. Returns the PID killed.
   */
  killWorkerProcess(ordinal: number): number {
    const want = [`POD_NAMESPACE=${this.namespace}`, `POD_NAME=berth-worker-${ordinal}`];
    for (const entry of readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      try {
        const cmdline = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
        if (!cmdline[0]?.endsWith('node') || !cmdline.includes('start')) continue;
        const environ = readFileSync(`/proc/${entry}/environ`, 'utf8').split('\0');
        if (!want.every((w) => environ.includes(w))) continue;
        process.kill(Number(entry), 'SIGKILL');
        return Number(entry);
      } catch {
        // The process ended while it was read.
      }
    }
    throw new Error(`no worker process of berth-worker-${ordinal} in ${this.namespace} on this node`);
  }

  /** `kubectl delete pod --grace-period=0 --force` of replica `ordinal`. */
  async forceDelete(ordinal: number): Promise<void> {
    await this.k('delete', 'pod', `berth-worker-${ordinal}`, '--grace-period=0', '--force');
  }

  /** The worker id (Vela hostname) of replica `ordinal`. */
  workerId(ordinal: number): string {
    return `berth-worker-${ordinal}.berth-worker.${this.namespace}.svc`;
  }

  /** The namespace's pods, events and the workers' last log lines, for a failure's report. */
  async describe(): Promise<string> {
    const parts = await Promise.all([
      this.k('get', 'pods,pvc', '-o', 'wide').catch((e: Error) => e.message),
      this.k('get', 'events', '--sort-by=.lastTimestamp').catch((e: Error) => e.message),
      this.k('logs', '-l', 'app.kubernetes.io/name=berth-worker', '--tail=20', '--prefix').catch((e: Error) => e.message),
    ]);
    return parts.join('\n');
  }

  /**
   * Deletes the namespace, its state volumes and their directories. The workers are force-deleted
   * first: a test's teardown does not wait out their drain.
   */
  async destroy(): Promise<void> {
    await this.k('delete', 'pods', '--all', '--grace-period=0', '--force', '--wait=false').catch(() => undefined);
    await this.kubectl(['delete', 'namespace', this.namespace, '--wait=true', '--timeout=120s'], 150_000).catch(() => undefined);
    if (this.#volumes.length > 0) await this.kubectl(['delete', 'pv', ...this.#volumes, '--ignore-not-found']).catch(() => undefined);
    rmSync(path.join(STATE_ROOT, this.namespace), { recursive: true, force: true });
    rmSync(this.#dir, { recursive: true, force: true });
    basesInUse.delete(this.portBase);
  }
}

/** The port bases of this process's fleets (released by destroy). */
const basesInUse = new Set<number>();

/** The first port of the node's ephemeral range (connections' local ports), 32768 when unknown. */
function ephemeralLow(): number {
  try {
    const low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    return Number.isInteger(low) && low > 21_000 ? low : 32_768;
  } catch {
    return 32_768;
  }
}

/** Whether 127.0.0.1:`port` can be listened on now (the replicas share the node's network). */
function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/** A random port base (a multiple of 10 from 20000, below the ephemeral ports) for `count` replicas. */
async function freePortBase(count: number): Promise<number> {
  const slots = Math.floor((ephemeralLow() - 20_000 - count) / 10);
  for (let attempt = 0; attempt < 100; attempt++) {
    const base = 20_000 + 10 * Math.floor(Math.random() * slots);
    if (basesInUse.has(base)) continue;
    let free = true;
    for (let i = 0; i < count && free; i++) free = await portFree(base + i);
    if (free) {
      basesInUse.add(base);
      return base;
    }
  }
  throw new Error(`no free port base for ${count} replicas between 20000 and ${ephemeralLow()}: set FleetOptions.portBase`);
}

/** `name[:tag]` of an image reference (a registry port is not a tag). */
function splitImage(image: string): [string, string | undefined] {
  const slash = image.lastIndexOf('/');
  const colon = image.lastIndexOf(':');
  return colon > slash ? [image.slice(0, colon), image.slice(colon + 1)] : [image, undefined];
}
