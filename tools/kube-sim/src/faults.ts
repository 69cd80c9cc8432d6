// Fault injection, switchable while running through `sim.faults` or `POST /_sim/faults`.

import { type Verb } from './counters.ts';

/** A pull failure to inject for one image reference (as written in the pod spec). */
export interface ImagePullFault {
  /** Waiting reason reported, e.g. `ErrImagePull` (then backs off to `ImagePullBackOff`), `InvalidImageName`, `RegistryUnavailable`. */
  reason: string;
  /** Error text; a kubelet-like default is used when absent. */
  message?: string;
}

/** Requests that RBAC denies (403 Forbidden); an absent field matches anything. */
interface ForbiddenRule {
  verbs?: Verb[];
  /** e.g. `pods`, `pods/log`, `events`. */
  resources?: string[];
  namespaces?: string[];
}

/** The active fault settings. */
export interface FaultSettings {
  /** Close every open watch stream every N seconds (clean end of the response), or null. */
  closeWatchesEverySeconds: number | null;
  /** Answer the next `count` requests whose verb is in `verbs` with HTTP `code` (a Status body). */
  failRequests: { count: number; code: 410 | 429 | 500; verbs: Verb[] } | null;
  /** Delay every watch event by this many milliseconds (order is kept). */
  watchEventDelayMs: number;
  /** Cut (reset) every log stream after this many bytes of content, or null. */
  logCutAfterBytes: number | null;
  /** Make pulls of these images fail, keyed by the image reference. */
  imagePullFailures: Record<string, ImagePullFault>;
  /** Stall the node agent: new pods stay Pending and running pods do not progress. */
  stallNodeAgent: boolean;
  /**
   * Images (as written in the spec) that are not yet on the node although the engine has them:
   * the first use pulls them, which takes this many milliseconds (pulls are serialised per node).
   */
  slowPulls: Record<string, number>;
  /** Missing RBAC: matching requests are answered 403 Forbidden as the API server words it. */
  forbidden: ForbiddenRule[];
}

/** An update: any subset of the settings, plus the one-shot `closeWatchesNow`. */
export interface FaultUpdate extends Partial<Omit<FaultSettings, 'failRequests'>> {
  /** Close every open watch stream now. */
  closeWatchesNow?: boolean;
  /** As in FaultSettings; `verbs` defaults to `['list', 'watch']`. */
  failRequests?: { count: number; code: 410 | 429 | 500; verbs?: Verb[] } | null;
}

function defaults(): FaultSettings {
  return {
    closeWatchesEverySeconds: null,
    failRequests: null,
    watchEventDelayMs: 0,
    logCutAfterBytes: null,
    imagePullFailures: {},
    stallNodeAgent: false,
    slowPulls: {},
    forbidden: [],
  };
}

/** The fault switchboard of one kube-sim. */
export class Faults {
  #settings = defaults();
  #timer: NodeJS.Timeout | undefined;
  readonly #closeListeners = new Set<() => void>();
  readonly #changeListeners = new Set<() => void>();

  /** The active watch event delay (cheap: read on every event). */
  get watchEventDelayMs(): number {
    return this.#settings.watchEventDelayMs;
  }

  /** The active log cut threshold, or null. */
  get logCutAfterBytes(): number | null {
    return this.#settings.logCutAfterBytes;
  }

  /** True while the node agent is stalled. */
  get agentStalled(): boolean {
    return this.#settings.stallNodeAgent;
  }

  /** The injected pull failure for an image, if any. */
  pullFailure(image: string): ImagePullFault | undefined {
    return this.#settings.imagePullFailures[image];
  }

  /** How long a pull of `image` takes when it is a slow pull, else undefined. */
  slowPull(image: string): number | undefined {
    return this.#settings.slowPulls[image];
  }

  /** True when a forbidden rule matches this request. */
  isForbidden(verb: Verb, resource: string, namespace: string | undefined): boolean {
    return this.#settings.forbidden.some(
      (r) =>
        (!r.verbs || r.verbs.includes(verb)) &&
        (!r.resources || r.resources.includes(resource)) &&
        (!r.namespaces || (namespace !== undefined && r.namespaces.includes(namespace))),
    );
  }

  /** A copy of the active settings. */
  get(): FaultSettings {
    return structuredClone(this.#settings);
  }

  /** Changes some settings (others keep their value). Validates the input; throws on nonsense. */
  set(update: FaultUpdate): FaultSettings {
    const next = { ...this.#settings };
    if (update.closeWatchesEverySeconds !== undefined) {
      const n = update.closeWatchesEverySeconds;
      if (n !== null && !(typeof n === 'number' && n > 0)) throw new TypeError('closeWatchesEverySeconds must be a positive number or null');
      next.closeWatchesEverySeconds = n;
    }
    if (update.failRequests !== undefined) {
      const f = update.failRequests;
      if (f !== null && (![410, 429, 500].includes(f.code) || !(f.count >= 0))) throw new TypeError('failRequests needs count >= 0 and code 410, 429 or 500');
      next.failRequests = f === null ? null : { count: f.count, code: f.code, verbs: f.verbs ?? ['list', 'watch'] };
    }
    if (update.watchEventDelayMs !== undefined) next.watchEventDelayMs = Math.max(0, Number(update.watchEventDelayMs) || 0);
    if (update.logCutAfterBytes !== undefined) next.logCutAfterBytes = update.logCutAfterBytes === null ? null : Math.max(0, Number(update.logCutAfterBytes));
    if (update.imagePullFailures !== undefined) next.imagePullFailures = { ...(update.imagePullFailures ?? {}) };
    if (update.stallNodeAgent !== undefined) next.stallNodeAgent = Boolean(update.stallNodeAgent);
    if (update.forbidden !== undefined) {
      if (!Array.isArray(update.forbidden)) throw new TypeError('forbidden must be a list of { verbs?, resources?, namespaces? }');
      next.forbidden = structuredClone(update.forbidden);
    }
    if (update.slowPulls !== undefined) {
      const pulls = update.slowPulls ?? {};
      for (const [image, ms] of Object.entries(pulls)) {
        if (!(typeof ms === 'number' && ms >= 0)) throw new TypeError(`slowPulls["${image}"] must be a number of milliseconds >= 0`);
      }
      next.slowPulls = { ...pulls };
    }
    const periodChanged = next.closeWatchesEverySeconds !== this.#settings.closeWatchesEverySeconds;
    this.#settings = next;
    if (periodChanged) this.#restartTimer();
    if (update.closeWatchesNow) this.closeWatches();
    for (const l of [...this.#changeListeners]) l();
    return this.get();
  }

  /** Back to no faults at all. */
  clear(): FaultSettings {
    this.set({ ...defaults() });
    return this.get();
  }

  /** Closes every open watch now. */
  closeWatches(): void {
    for (const l of [...this.#closeListeners]) l();
  }

  /** If a request failure is armed for this verb, consumes one and returns its status code. */
  takeFailure(verb: Verb): 410 | 429 | 500 | undefined {
    const f = this.#settings.failRequests;
    if (!f || f.count <= 0 || !f.verbs.includes(verb)) return undefined;
    f.count--;
    return f.code;
  }

  /** Called whenever watches must close (now, or on the period). Returns an unsubscribe function. */
  onCloseWatches(listener: () => void): () => void {
    this.#closeListeners.add(listener);
    return () => this.#closeListeners.delete(listener);
  }

  /** Called after every change of settings. Returns an unsubscribe function. */
  onChange(listener: () => void): () => void {
    this.#changeListeners.add(listener);
    return () => this.#changeListeners.delete(listener);
  }

  #restartTimer(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
    const n = this.#settings.closeWatchesEverySeconds;
    if (n) {
      this.#timer = setInterval(() => this.closeWatches(), n * 1000);
      this.#timer.unref();
    }
  }

  /** Stops the periodic timer (called by close()). */
  dispose(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
    this.#closeListeners.clear();
    this.#changeListeners.clear();
  }
}
