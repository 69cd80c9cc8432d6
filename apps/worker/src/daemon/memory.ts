/**
 * Gives memory back when the worker is idle. Loading the worker and running a build leave V8's
 * young generation at its largest (two 16 MB semi-spaces: everything loaded at start-up survives
 * the scavenges that grow it), and V8 shrinks it only in a memory-reducing collection, which an
 * idle worker polling its queue does not trigger by itself. So once the worker is up, and again
 * each time its last running build ends, it runs such a collection, twice (~20-50 ms each, while
 * idle): ~15-30 MB less resident memory for an idle worker (tools/bench startup), a young
 * generation that grows back only as far as the next builds need (~4 MB for a 256 MiB log), and
 * the code only the last build ran dropped (below).
 */
import type { Logger } from 'pino';

type Collect = (options: { type: 'major'; execution: 'sync'; flavor: 'last-resort' }) => void;

/**
 * The name `berth start` exposes V8's collection under (bin/berth.js re-executes Node with
 * `--expose-gc-as=` it): a name no code looks for, rather than the `gc` global.
 */
export const EXPOSED_GC = '__berthCollectGarbage';

let collect: Collect | undefined;

/**
 * How many of V8's "last resort" collections {@link collectGarbageNow} runs. Each is two full
 * collections (V8: Heap::CollectAllAvailableGarbage, at least two attempts), and `berth start`
 * has V8 drop the code not run for 3 of them (`--bytecode-old-age=3`, bin/berth.js): one leaves
 * the code the last build ran in the heap until later collections age it, two drop it (an idle
 * worker after five builds: ~0.8 MB less, tools/bench worker-memory).
 */
const IDLE_COLLECTIONS = 2;

/**
 * A full, memory-reducing garbage collection now (V8's "last resort" collection, which also
 * shrinks the young generation), {@link IDLE_COLLECTIONS} times. Node offers it only behind
 * `--expose-gc`: `berth start` is run with it exposed under {@link EXPOSED_GC}; elsewhere (tests,
 * the daemon run in-process) the flag is turned on for the moment it takes to fetch the function
 * from a new context, so `gc` never appears as a global. (That context, node:vm and node:v8 cost
 * ~0.6 MB of an idle worker.)
 */
export function collectGarbageNow(): void {
  if (collect === undefined) {
    const exposed = (globalThis as Record<string, unknown>)[EXPOSED_GC];
    if (typeof exposed === 'function') collect = exposed as Collect;
    else {
      const v8 = process.getBuiltinModule('node:v8');
      v8.setFlagsFromString('--expose-gc');
      collect = process.getBuiltinModule('node:vm').runInNewContext('gc') as Collect;
      v8.setFlagsFromString('--no-expose-gc');
    }
  }
  for (let i = 0; i < IDLE_COLLECTIONS; i++) collect({ type: 'major', execution: 'sync', flavor: 'last-resort' });
}

/** Runs {@link collectGarbageNow} shortly after being asked, if the worker is idle by then. */
export class MemorySettler {
  readonly #log: Logger;
  readonly #idle: () => boolean;
  readonly #delayMs: number;
  #timer: NodeJS.Timeout | undefined;
  #stopped = false;

  constructor(log: Logger, idle: () => boolean, delayMs = 1_000) {
    this.#log = log;
    this.#idle = idle;
    this.#delayMs = delayMs;
  }

  /** Asks for a collection in `delayMs`; one pending request at a time. */
  soon(): void {
    if (this.#stopped || this.#timer !== undefined) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      if (this.#stopped || !this.#idle()) return;
      const before = process.memoryUsage.rss();
      const started = performance.now();
      collectGarbageNow();
      const mb = (n: number) => Math.round(n / 100_000) / 10;
      this.#log.debug(
        { rssBeforeMb: mb(before), rssAfterMb: mb(process.memoryUsage.rss()), ms: Math.round(performance.now() - started) },
        'idle: memory given back',
      );
    }, this.#delayMs);
    this.#timer.unref();
  }

  /** No more collections (the worker stops). */
  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }
}
