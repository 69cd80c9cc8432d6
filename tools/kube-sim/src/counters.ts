// Exact request accounting: every API request is counted once, when it is routed, by verb,
// resource and subresource; watches open now and at most; log bytes written to clients; response
// bytes and watch events sent, to compare how traffic grows with the number of workers.

/** Kubernetes request verbs as the API server names them. */
export type Verb = 'get' | 'list' | 'watch' | 'create' | 'update' | 'patch' | 'delete' | 'deletecollection';

/** A point-in-time copy of the counters. */
export interface CountersSnapshot {
  /** Every counted API request (discovery included). */
  requestsTotal: number;
  /** By verb: `{ list: 3, watch: 1, ... }`. */
  byVerb: Record<string, number>;
  /** By resource, subresource joined with `/`: `{ pods: 5, 'pods/log': 2, events: 1 }`. */
  byResource: Record<string, number>;
  /** By verb and resource: `{ 'list pods': 1, 'get pods/log': 2 }`. */
  byVerbResource: Record<string, number>;
  /** Requests answered by an injected fault, by status code. */
  faultsInjected: Record<string, number>;
  watches: { open: number; maxOpen: number; opened: number };
  logs: { streams: number; bytes: number };
  /** Response bytes written to clients (headers excluded), by verb and resource: `{ 'watch events': 51234 }`. */
  bytesByVerbResource: Record<string, number>;
  /** Watch events sent (ADDED, MODIFIED, DELETED; not BOOKMARK or ERROR), by resource: `{ events: 120 }`. */
  watchEventsByResource: Record<string, number>;
}

/** The live counters of one kube-sim. */
export class Counters {
  #total = 0;
  #byVerb = new Map<string, number>();
  #byResource = new Map<string, number>();
  #byVerbResource = new Map<string, number>();
  #faults = new Map<string, number>();
  #openWatches = 0;
  #maxOpenWatches = 0;
  #watchesOpened = 0;
  #logStreams = 0;
  #logBytes = 0;
  #bytes = new Map<string, number>();
  #watchEvents = new Map<string, number>();

  /** Counts one API request. `resource` is e.g. `pods` or `discovery`. */
  request(verb: Verb, resource: string, subresource?: string): void {
    const res = subresource ? `${resource}/${subresource}` : resource;
    this.#total++;
    bump(this.#byVerb, verb);
    bump(this.#byResource, res);
    bump(this.#byVerbResource, `${verb} ${res}`);
  }

  /** Counts a request answered by fault injection. */
  fault(code: number): void {
    bump(this.#faults, String(code));
  }

  /** A watch stream opened; returns the function to call once when it closes. */
  watchOpened(): () => void {
    this.#openWatches++;
    this.#watchesOpened++;
    this.#maxOpenWatches = Math.max(this.#maxOpenWatches, this.#openWatches);
    let closed = false;
    return () => {
      if (closed) return;
      closed = true;
      this.#openWatches--;
    };
  }

  /** A log stream started. */
  logStream(): void {
    this.#logStreams++;
  }

  /** Bytes of log content written to a client. */
  logBytes(n: number): void {
    this.#logBytes += n;
  }

  /** `n` response bytes written for a `verb` request of `resource` (subresource joined with `/`). */
  bytesSent(verb: Verb, resource: string, n: number): void {
    bump(this.#bytes, `${verb} ${resource}`, n);
  }

  /** One watch event (not a bookmark) sent on a watch of `resource`. */
  watchEventSent(resource: string): void {
    bump(this.#watchEvents, resource);
  }

  /** A copy of the counters now. */
  snapshot(): CountersSnapshot {
    return {
      requestsTotal: this.#total,
      byVerb: Object.fromEntries(this.#byVerb),
      byResource: Object.fromEntries(this.#byResource),
      byVerbResource: Object.fromEntries(this.#byVerbResource),
      faultsInjected: Object.fromEntries(this.#faults),
      watches: { open: this.#openWatches, maxOpen: this.#maxOpenWatches, opened: this.#watchesOpened },
      logs: { streams: this.#logStreams, bytes: this.#logBytes },
      bytesByVerbResource: Object.fromEntries(this.#bytes),
      watchEventsByResource: Object.fromEntries(this.#watchEvents),
    };
  }

  /** Zeroes every counter except the number of watches open now (maxOpen restarts from it). */
  reset(): void {
    this.#total = 0;
    this.#byVerb.clear();
    this.#byResource.clear();
    this.#byVerbResource.clear();
    this.#faults.clear();
    this.#maxOpenWatches = this.#openWatches;
    this.#watchesOpened = 0;
    this.#logStreams = 0;
    this.#logBytes = 0;
    this.#bytes.clear();
    this.#watchEvents.clear();
  }
}

function bump(map: Map<string, number>, key: string, n = 1): void {
  map.set(key, (map.get(key) ?? 0) + n);
}
