// startKubeSim: composes the store, the HTTPS API, the node agent, faults and counters.

import Docker from 'dockerode';
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { NodeAgent, removeInstanceObjects } from './agent/node-agent.ts';
import { defaultSpamFilter, type EventSpamFilter } from './agent/event-recorder.ts';
import { faithfulKubelet, type PullBackoff } from './agent/kubelet-behaviour.ts';
import { ContainerLogManager, type LogRotationPolicy, type LogRotationStats, logRotationPolicy } from './agent/log-rotation.ts';
import { WatchHub } from './api/watch.ts';
import { Counters } from './counters.ts';
import { Faults } from './faults.ts';
import { serveLog } from './logs.ts';
import { createApiServer } from './server.ts';
import { Store } from './store.ts';
import { generateTls, renderKubeconfig } from './tls.ts';

/** Options of startKubeSim. Every field is optional. */
export interface KubeSimOptions {
  /** TCP port on 127.0.0.1; 0 (default) picks a free one. */
  port?: number;
  /** Directory for the CA, server certificate and kubeconfig; default a new temporary directory, removed on close. */
  dir?: string;
  /** Bearer token clients must send; default random. */
  token?: string;
  /** A dockerode client, or options for one; default the local engine socket. */
  docker?: Docker | Docker.DockerOptions;
  /** Sandbox image; default `$BERTH_PAUSE_IMAGE` or `berth/pause:1`. Must be present locally. */
  pauseImage?: string;
  /** Name of the one fake node. Default `kube-sim-node`. */
  nodeName?: string;
  /** How many changes the watch history keeps per resource; a watch from an older version gets 410 Expired. Default 1000. */
  historyLimit?: number;
  /**
   * How far back in time the watch history of a resource surely reaches; older changes go once a
   * resource has more than 100 (the watch cache's eventFreshDuration and lower bound). Default 75 000 ms.
   */
  historyWindowMs?: number;
  /** The user named in 403 Forbidden messages (fault `forbidden`). Default `system:serviceaccount:default:berth-worker`. */
  user?: string;
  /**
   * Period of BOOKMARK events on watches with allowWatchBookmarks. Default 60 000 ms, as the API
   * server's watch cache (plus one 2 s before the watch's deadline). Note that
   * @kubernetes/client-node 2.x silently re-opens a watch that has been quiet for 30 s: with the
   * default, a quiet watch is re-opened about every 30 s.
   */
  bookmarkIntervalMs?: number;
  /** Server-side watch timeout when the client sends none; default random 30–60 min as the API server does. */
  watchTimeoutSeconds?: number;
  /** Image pull back-off; default the kubelet's 10 s doubling to 300 s. */
  imagePullBackoff?: Partial<PullBackoff>;
  /** Namespaces to create at start besides default, kube-system, kube-public and kube-node-lease. */
  namespaces?: string[];
  /**
   * The kubelet's PLEG relist period: container starts and exits reach the pod status on this
   * tick, so short-lived states may never be published. Default 1000 ms; 0 publishes every change at once.
   */
  statusRelistMs?: number;
  /**
   * The kubelet's container log rotation: every `checkPeriodMs` (10 000, `containerLogMonitorInterval`)
   * a running container whose current log file (in the CRI format) reached `maxSize` (10Mi,
   * `containerLogMaxSize`) is rotated; `maxFiles` (5, `containerLogMaxFiles`, must be > 1) is
   * checked as the kubelet does, but no rotated file is ever served anyway. pods/log serves only
   * the current file, and a follow that lags behind a rotation ends at the old file's end when
   * the container has exited meanwhile (see logs.ts). On by default; `false` or a negative
   * `maxSize` turns it off.
   */
  logRotation?: Partial<LogRotationPolicy> | false;
  /**
   * Rule 10: act on a spec change (image patch) only at the first PLEG relist that starts after the
   * pod's last sync ended, as the kubelet's pod worker does (pod_workers.go podWorkerLoop,
   * GetNewerThan): up to `statusRelistMs` later. The real kubelet always does (true); kube-sim's
   * default is false, acting at once, because the wait adds about 1 s to every pause → step swap
   * of every test that runs steps on kube-sim (the executor matrix's kube-sim lane: 53 s → 78 s).
   * The real-cluster lane covers it. Off as well with `statusRelistMs: 0`.
   */
  syncWaitsForRelist?: boolean;
  /** The kubelet's `serializeImagePulls`: one image pull at a time on the node. Default true. */
  serializeImagePulls?: boolean;
  /** The event spam filter's token bucket per source + object; default client-go's `{ burst: 25, refillMs: 300000 }`. */
  eventSpamFilter?: Partial<EventSpamFilter>;
  /**
   * Conveniences that a real kubelet does not offer, each off by default. Use them only to keep
   * a test about something else short; a client must cope with the faithful behaviour.
   */
  lenient?: LenientOptions;
}

/** Lenient knobs: each restores a convenience a real kubelet does not offer. All default to false. */
export interface LenientOptions {
  /** Retry a failed image switch (image patched on a running container) even under restartPolicy Never, showing ErrImagePull/ImagePullBackOff. */
  retryFailedImageSwitch?: boolean;
  /** Start a pod's containers all at once (no per-pod start order); pulls stay serialised unless `serializeImagePulls: false`. */
  parallelStarts?: boolean;
  /** Kill the running containers that image patches replaced all at once, instead of one after another, each in its grace (rule 8). */
  parallelPatchKills?: boolean;
  /** Publish every container state change at once (same as `statusRelistMs: 0`). */
  immediateStatus?: boolean;
  /** Report `status.image` as the spec's reference (fully qualified) instead of containerd's first tag of the image record. */
  specImageNames?: boolean;
  /** Write every event (no spam filter); repeats are still aggregated. */
  noEventSpamFilter?: boolean;
}

/** A running kube-sim. */
export interface KubeSim {
  /** `https://127.0.0.1:<port>`. */
  url: string;
  /** Path of the kubeconfig written at start (for kubectl `--kubeconfig`). */
  kubeconfigPath: string;
  /** The kubeconfig YAML (for `KubeConfig.loadFromString`). */
  kubeconfig: string;
  /** The bearer token. */
  token: string;
  /** PEM of the CA that signed the server certificate. */
  caCert: string;
  /** Id labelled on every Docker object (`berth.kube-sim/instance=<id>`). */
  instanceId: string;
  /** The fault switchboard (also `POST /_sim/faults`). */
  faults: Faults;
  /** Request, watch and log counters (also `GET /_sim/counters`). */
  counters: Counters;
  /** What the log rotation did so far (all zero when `logRotation` is off). */
  logRotationStats(): LogRotationStats;
  /** Stops serving, closes watches, kills pods, removes every Docker object it created. Idempotent. */
  close(): Promise<void>;
}

function dockerClient(option: KubeSimOptions['docker']): Docker {
  if (option instanceof Docker) return option;
  return new Docker(option);
}

/**
 * Starts a kube-sim: an HTTPS Kubernetes API test double on 127.0.0.1 whose pods run in Docker.
 * Gotcha: nothing is pulled, ever; the pause image and every image a pod should run must be
 * present in the local engine.
 */
export async function startKubeSim(options: KubeSimOptions = {}): Promise<KubeSim> {
  const docker = dockerClient(options.docker);
  const rotation = logRotationPolicy(options.logRotation);
  const pauseImage = options.pauseImage ?? process.env.BERTH_PAUSE_IMAGE ?? 'berth/pause:1';
  try {
    await docker.getImage(pauseImage).inspect();
  } catch (err) {
    throw new Error(`[kube-sim] the pause image "${pauseImage}" is not present in the Docker engine (run tools/images/build.sh): ${(err as Error).message}`, {
      cause: err,
    });
  }
  const ownDir = options.dir === undefined;
  const dir = options.dir ?? (await mkdtemp(path.join(tmpdir(), 'kube-sim-')));
  await mkdir(dir, { recursive: true });
  const tls = await generateTls(dir);
  const token = options.token ?? randomBytes(24).toString('hex');
  const instanceId = randomBytes(6).toString('hex');

  const store = new Store({
    ...(options.historyLimit !== undefined ? { limit: options.historyLimit } : {}),
    ...(options.historyWindowMs !== undefined ? { windowMs: options.historyWindowMs } : {}),
  });
  for (const ns of ['default', 'kube-system', 'kube-public', 'kube-node-lease', ...(options.namespaces ?? [])]) {
    store.create('namespaces', {
      apiVersion: 'v1',
      kind: 'Namespace',
      metadata: { name: ns, labels: { 'kubernetes.io/metadata.name': ns } },
      spec: { finalizers: ['kubernetes'] },
      status: { phase: 'Active' },
    });
  }
  const counters = new Counters();
  const faults = new Faults();
  const hub = new WatchHub();
  const agent = new NodeAgent({
    docker,
    store,
    faults,
    instance: instanceId,
    nodeName: options.nodeName ?? 'kube-sim-node',
    pauseImage,
    pullBackoff: { initialMs: options.imagePullBackoff?.initialMs ?? 10_000, maxMs: options.imagePullBackoff?.maxMs ?? 300_000 },
    behaviour: {
      retryFailedImageSwitch: options.lenient?.retryFailedImageSwitch ?? faithfulKubelet.retryFailedImageSwitch,
      parallelStarts: options.lenient?.parallelStarts ?? faithfulKubelet.parallelStarts,
      parallelPatchKills: options.lenient?.parallelPatchKills ?? faithfulKubelet.parallelPatchKills,
      serializeImagePulls: options.serializeImagePulls ?? faithfulKubelet.serializeImagePulls,
      statusRelistMs: options.lenient?.immediateStatus ? 0 : Math.max(0, options.statusRelistMs ?? faithfulKubelet.statusRelistMs),
      specImageNames: options.lenient?.specImageNames ?? faithfulKubelet.specImageNames,
      syncWaitsForRelist: options.syncWaitsForRelist ?? false,
    },
    eventSpamFilter: options.lenient?.noEventSpamFilter ? null : { ...defaultSpamFilter, ...options.eventSpamFilter },
  });
  const logs = rotation === null ? null : new ContainerLogManager(docker, instanceId, rotation, (id) => agent.containerRunning(id));
  let address = '127.0.0.1:0';
  const server = createApiServer(tls, {
    token,
    store,
    counters,
    faults,
    hub,
    settings: { bookmarkIntervalMs: options.bookmarkIntervalMs ?? 60_000, defaultTimeoutSeconds: options.watchTimeoutSeconds ?? null, freshWaitMs: 3000 },
    serveLog: (pod, url, res) => serveLog({ docker, agent, counters, faults, logs }, pod, url, res),
    serverAddress: () => address,
    user: options.user ?? 'system:serviceaccount:default:berth-worker',
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  address = `127.0.0.1:${port}`;
  agent.start();
  logs?.start();
  const url = `https://127.0.0.1:${port}`;
  const kubeconfig = renderKubeconfig({ name: 'kube-sim', server: url, caCert: tls.caCert, token });
  const kubeconfigPath = path.join(dir, 'kubeconfig');
  await writeFile(kubeconfigPath, kubeconfig, { mode: 0o600 });

  let closing: Promise<void> | undefined;
  const close = (): Promise<void> => {
    closing ??= (async () => {
      hub.closeAll();
      faults.dispose();
      logs?.stop();
      const stopped = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      await stopped;
      await agent.close();
      await removeInstanceObjects(docker, instanceId);
      if (ownDir) await rm(dir, { recursive: true, force: true });
    })();
    return closing;
  };

  const logRotationStats = (): LogRotationStats => logs?.stats() ?? { rotations: 0, followsEndedAtRotation: 0, filesSkipped: 0, recordsMeasured: 0 };
  return { url, kubeconfigPath, kubeconfig, token, caCert: tls.caCert, instanceId, faults, counters, logRotationStats, close };
}
