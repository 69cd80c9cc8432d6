/**
 * The daemon's Prometheus metrics (prom-client), in a registry of its own so that several
 * daemons in one process (tests) never share counters.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { httpTransport, type Transport } from '../vela/transport.ts';

/** Durations of builds and steps, in seconds: from a second to two hours. */
const DURATION_BUCKETS = [1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200];
/** Queue waits, in seconds: from 100 ms to an hour. */
const WAIT_BUCKETS = [0.1, 0.5, 1, 5, 15, 30, 60, 300, 900, 3600];

/**
 * Every metric `berth start` exposes on `/metrics`. Names start with `berth_worker_`.
 *
 * Gotcha: `kubernetesWatchRestarts` reads a callback at scrape time; set it with
 * {@link DaemonMetrics.watchRestartsFrom} once the runtime exists (0 for runtimes without watches).
 */
export class DaemonMetrics {
  readonly registry = new Registry();
  readonly buildsRunning: Gauge;
  readonly buildsTotal: Counter<'status'>;
  readonly buildDuration: Histogram<'status'>;
  readonly queueWait: Histogram;
  readonly stepDuration: Histogram<'kind' | 'status'>;
  readonly logBytes: Counter<'kind'>;
  readonly apiCalls: Counter<'method' | 'status'>;
  readonly runtimeErrors: Counter<'code'>;
  readonly queueItems: Counter<'result'>;
  readonly kubernetesWatchRestarts: Counter;
  /** The build limit (as GitLab Runner's `gitlab_runner_concurrent`). */
  readonly buildLimit: Gauge;
  /** Always 1, labelled with the worker's version (as GitLab Runner's `gitlab_runner_version_info`). */
  readonly versionInfo: Gauge<'version'>;
  #watchRestarts: () => number = () => 0;

  constructor(options: { defaultMetrics?: boolean } = {}) {
    const registers = [this.registry];
    this.buildsRunning = new Gauge({ name: 'berth_worker_builds_running', help: 'Builds running on this worker now.', registers });
    this.buildsTotal = new Counter({
      name: 'berth_worker_builds_total',
      help: 'Builds this worker finished, by final status.',
      labelNames: ['status'],
      registers,
    });
    this.buildDuration = new Histogram({
      name: 'berth_worker_build_duration_seconds',
      help: 'Duration of builds from claim to final status, by final status.',
      labelNames: ['status'],
      buckets: DURATION_BUCKETS,
      registers,
    });
    this.queueWait = new Histogram({
      name: 'berth_worker_queue_wait_seconds',
      help: 'Time from enqueue (server) to claim (this worker).',
      buckets: WAIT_BUCKETS,
      registers,
    });
    this.stepDuration = new Histogram({
      name: 'berth_worker_step_duration_seconds',
      help: 'Duration of steps and services that started, by kind and final status.',
      labelNames: ['kind', 'status'],
      buckets: DURATION_BUCKETS,
      registers,
    });
    this.logBytes = new Counter({
      name: 'berth_worker_log_bytes_total',
      help: 'Log bytes received from containers (masked, capped), by kind.',
      labelNames: ['kind'],
      registers,
    });
    this.apiCalls = new Counter({
      name: 'berth_worker_server_api_calls_total',
      help: 'Calls to the Vela server API (each attempt), by method and HTTP status (0: no answer).',
      labelNames: ['method', 'status'],
      registers,
    });
    this.runtimeErrors = new Counter({
      name: 'berth_worker_runtime_errors_total',
      help: 'Runtime calls that failed, by RuntimeError code.',
      labelNames: ['code'],
      registers,
    });
    this.queueItems = new Counter({
      name: 'berth_worker_queue_pops_total',
      help: 'Queue pops by result: item, stale, bad-signature, bad-item, empty, error.',
      labelNames: ['result'],
      registers,
    });
    const read = (): number => this.#watchRestarts();
    let counted = 0;
    this.kubernetesWatchRestarts = new Counter({
      name: 'berth_worker_kubernetes_watch_restarts_total',
      help: 'Restarts of the Kubernetes runtime pod and event watches since start (0 for other runtimes).',
      registers,
      collect() {
        // The runtime counts; the counter catches up at scrape time (never goes down).
        const now = read();
        if (now > counted) this.inc(now - counted);
        counted = Math.max(counted, now);
      },
    });
    this.buildLimit = new Gauge({ name: 'berth_worker_build_limit', help: 'How many builds this worker runs at once (VELA_BUILD_LIMIT).', registers });
    this.versionInfo = new Gauge({
      name: 'berth_worker_version_info',
      help: "The worker's version, as a label; the value is always 1.",
      labelNames: ['version'],
      registers,
    });
    // Node's default metrics under their standard names (process_*, nodejs_*), so stock dashboards work.
    if (options.defaultMetrics !== false) collectDefaultMetrics({ register: this.registry });
  }

  /** Sets the build-limit gauge and the version info. */
  describe(info: { version: string; buildLimit: number }): void {
    this.buildLimit.set(info.buildLimit);
    this.versionInfo.reset();
    this.versionInfo.set({ version: info.version }, 1);
  }

  /** Where the watch-restart counter reads the runtime's count at scrape time. */
  watchRestartsFrom(read: () => number): void {
    this.#watchRestarts = read;
  }

  /**
   * A transport that counts every call by method and answered status (0 when there was no
   * answer), for the Vela client's `transport` option.
   */
  countingTransport(inner: Transport = httpTransport): Transport {
    return async (url, request) => {
      const method = request.method.toUpperCase();
      try {
        const res = await inner(url, request);
        this.apiCalls.inc({ method, status: String(res.status) });
        return res;
      } catch (e) {
        this.apiCalls.inc({ method, status: '0' });
        throw e;
      }
    };
  }
}
