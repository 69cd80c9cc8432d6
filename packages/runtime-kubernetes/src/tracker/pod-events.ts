/**
 * The events of one build pod, listed when the build needs them to explain something rather than
 * watched: a namespace-wide events watch carries every pod's events to every worker of the namespace
 * (issue 25 item 7), and events cannot be selected by the pod's labels. Each list costs the
 * apiserver a scan of the namespace's events, so the BuildTracker asks only on trouble.
 */
import type { CoreV1Event } from '@kubernetes/client-node';

/**
 * Lists the events whose involved object is the build's pod: `involvedObject.kind=Pod,involvedObject.name=<pod>`,
 * both selectable fields of events (kubernetes/kubernetes pkg/registry/core/event/strategy.go,
 * EventToSelectableFields). Resolves with an empty list on failure (the owner logs it).
 */
export type PodEventSource = () => Promise<readonly CoreV1Event[]>;

/**
 * Runs the lists of one pod's events, one at a time: a request while one runs makes one more run
 * after it (what happened meanwhile is in that one), never a queue. Each event listed is handed to
 * `feed`, which deduplicates (a list returns the earlier events again).
 */
export class PodEventLister {
  readonly #feed: (event: CoreV1Event) => void;
  #source: PodEventSource | undefined;
  #running: Promise<void> | undefined;
  #again = false;
  readonly #timers = new Set<NodeJS.Timeout>();

  constructor(feed: (event: CoreV1Event) => void) {
    this.#feed = feed;
  }

  /** Sets where events are listed from (undefined: nowhere; the tracker is then fed by a watch, or not at all). */
  use(source: PodEventSource | undefined): void {
    this.#source = source;
  }

  /**
   * Lists the pod's events now (or right after the list that runs) and feeds them. Resolves once a
   * list that started after this call is fed, or after `boundMs` at most. Never rejects.
   */
  refresh(boundMs?: number): Promise<void> {
    if (this.#source === undefined) return Promise.resolve();
    let done: Promise<void>;
    if (this.#running) {
      this.#again = true;
      done = this.#running;
    } else {
      done = this.#running = this.#loop().finally(() => (this.#running = undefined));
    }
    if (boundMs === undefined) return done;
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.#timers.delete(timer);
        resolve();
      }, boundMs);
      this.#timers.add(timer);
      void done.then(() => {
        clearTimeout(timer);
        this.#timers.delete(timer);
        resolve();
      });
    });
  }

  /** {@link refresh} in `ms` (e.g. once more before a start failure gives up on its event). */
  refreshLater(ms: number): void {
    if (this.#source === undefined) return;
    const timer = setTimeout(() => {
      this.#timers.delete(timer);
      void this.refresh();
    }, ms);
    this.#timers.add(timer);
  }

  /** Clears timers and forgets the source: nothing is listed any more. */
  dispose(): void {
    for (const timer of this.#timers) clearTimeout(timer);
    this.#timers.clear();
    this.#source = undefined;
  }

  async #loop(): Promise<void> {
    do {
      this.#again = false;
      const source = this.#source;
      if (source === undefined) return;
      const events = await source().catch(() => [] as readonly CoreV1Event[]);
      // A list comes in key (name) order; notices should come in the order things happened.
      for (const event of events.toSorted((a, b) => firstSeen(a) - firstSeen(b))) this.#feed(event);
    } while (this.#again);
  }
}

/** When an event was first recorded (ms), or 0 when it says nothing parsable. */
function firstSeen(event: CoreV1Event): number {
  const value: unknown = event.firstTimestamp ?? event.eventTime ?? event.lastTimestamp;
  const t = value instanceof Date ? value.getTime() : typeof value === 'string' ? Date.parse(value) : Number.NaN;
  return Number.isNaN(t) ? 0 : t;
}
