/**
 * The engine's `die`, `oom` and `kill` events of this worker's containers, on one connection per runtime
 * while any started container's exit is awaited: they tell a step's exit code before the wait
 * endpoint does.
 *
 * Why: dockerd publishes a container's `die` event, with its exit code, before it releases the
 * container's network endpoint and mounts, and answers `POST /containers/{id}/wait` only after
 * that. moby v20.10 (Debian 12's docker.io) daemon/monitor.go `handleContainerExit`: with the
 * container locked, `SetStopped`, then `LogContainerEventWithAttributes(c, "die", {exitCode})`,
 * then `daemon.Cleanup(c)` (the network released, the mounts undone), then the unlock; the wait
 * (container/state.go `State.Wait`) reads the exit code under that same lock, and so does an
 * inspect. By hand here (Docker 20.10.24, 8 containers on a user-defined bridge network): the
 * event 24–40 ms after the container's exit (`State.FinishedAt`), the wait's answer 74–108 ms
 * after it. Later moby (daemon/monitor.go since v25) cleans up first and logs `die` last: there
 * the two come together and nothing is lost.
 *
 * The wait stays subscribed and decides whatever the events do not tell in time: the exit is
 * whichever answers first. So the stream may be missing (a proxy that refuses it, an engine
 * restarted): the wait alone is then the exit, as before. An `oom` event of the container that
 * comes before its `die` makes the exit `OOMKilled` (daemon/monitor.go `ProcessEvent` logs `oom`
 * as it sets `OOMKilled`). The kernel's OOM notification is not ordered with the exit, though: a
 * process killed for memory just as the container's command exits 0 can have its `oom` event after
 * the `die` (seen once, at load 5), and is then not waited for: the step reads `Completed`, as its
 * exit code says (an exit that is not 0, a command killed for memory itself, is confirmed with an
 * inspect: containers.ts `waitContainer`). A `kill` event comes before the `die`
 * (daemon/kill.go `killWithSignal` logs it with the container locked, after the signal went out;
 * the exit's handling waits for that lock).
 */
import type { Readable } from 'node:stream';
import { LABELS, labelValue } from '@berth/runtime';
import type Docker from 'dockerode';

/** An exit as the `die` event told it. */
export interface EventExit {
  readonly StatusCode: number;
  /** Whether an `oom` event of the container came before its `die` (what inspect's `OOMKilled` says). */
  readonly oomKilled: boolean;
  /**
   * Whether a `kill` event came before its `die`: somebody signalled it (a stop, a removal, or
   * dockerd stopping its containers as it shuts down), so the exit code alone does not say the
   * step's own end.
   */
  readonly killed: boolean;
}

interface Waiter {
  resolve(exit: EventExit): void;
  oom: boolean;
  killed: boolean;
}

interface EngineEvent {
  Action?: string;
  status?: string;
  id?: string;
  Actor?: { ID?: string; Attributes?: Record<string, string> };
}

/** The most bytes of one event line kept while its end has not come (an event is well under 4 KiB). */
const MAX_LINE_BYTES = 256 * 1024;

export class ExitEvents {
  readonly #docker: Docker;
  readonly #filters: Record<string, string[]>;
  /** Container id → the exit awaited from its `die` event. */
  readonly #waiting = new Map<string, Waiter>();
  #stream: Readable | undefined;
  #opening: Promise<void> | undefined;
  #closeScheduled = false;
  #closed = false;

  constructor(docker: Docker, workerId: string) {
    this.#docker = docker;
    this.#filters = { type: ['container'], event: ['die', 'oom', 'kill'], label: [`${LABELS.worker}=${labelValue(workerId)}`] };
  }

  /**
   * Opens the connection unless it is open: resolves once the engine answered (or failed to:
   * never rejects, the wait then tells the exit alone). `signal` gives up on the opening.
   */
  async listen(signal: AbortSignal): Promise<void> {
    if (this.#closed || this.#stream) return;
    this.#opening ??= this.#connect().finally(() => (this.#opening = undefined));
    if (signal.aborted) return;
    let giveUp = (): void => undefined;
    const abandoned = new Promise<void>((resolve) => (giveUp = resolve));
    signal.addEventListener('abort', giveUp, { once: true });
    await Promise.race([this.#opening, abandoned]);
    signal.removeEventListener('abort', giveUp);
  }

  /**
   * The exit of container `id` (the engine's full id) from its `die` event: pending until the
   * event comes, for good once `signal` aborts (call {@link listen} first so the event is seen).
   */
  exitOf(id: string, signal: AbortSignal): Promise<EventExit> {
    return new Promise((resolve) => {
      if (signal.aborted || this.#closed) return;
      const drop = (): void => {
        if (this.#waiting.get(id) !== waiter) return;
        this.#waiting.delete(id);
        this.#closeWhenIdle();
      };
      const waiter: Waiter = {
        oom: false,
        killed: false,
        resolve: (exit) => {
          signal.removeEventListener('abort', drop);
          drop();
          resolve(exit);
        },
      };
      this.#waiting.set(id, waiter);
      signal.addEventListener('abort', drop, { once: true });
    });
  }

  /** Stops awaiting container `id`'s event (its exit is known otherwise); its pending {@link exitOf} stays pending. */
  forget(id: string): void {
    if (this.#waiting.delete(id)) this.#closeWhenIdle();
  }

  /** Closes the connection for good (the runtime closes). */
  close(): void {
    this.#closed = true;
    this.#waiting.clear();
    this.#stream?.destroy();
    this.#stream = undefined;
  }

  async #connect(): Promise<void> {
    let stream: Readable;
    try {
      stream = (await this.#docker.getEvents({ filters: this.#filters })) as unknown as Readable;
    } catch {
      return; // the wait tells the exits
    }
    if (this.#closed || this.#waiting.size === 0) {
      stream.destroy();
      return;
    }
    this.#stream = stream;
    let pending = '';
    stream.setEncoding('utf8');
    stream.on('data', (text: string) => {
      pending += text;
      let end: number;
      while ((end = pending.indexOf('\n')) >= 0) {
        this.#onLine(pending.slice(0, end));
        pending = pending.slice(end + 1);
      }
      if (pending.length > MAX_LINE_BYTES) pending = '';
    });
    const gone = (): void => {
      if (this.#stream === stream) this.#stream = undefined;
    };
    stream.on('error', gone);
    stream.on('close', gone);
    stream.on('end', gone);
  }

  #onLine(line: string): void {
    let event: EngineEvent;
    try {
      event = JSON.parse(line) as EngineEvent;
    } catch {
      return;
    }
    const id = event.Actor?.ID ?? event.id;
    const waiter = id === undefined ? undefined : this.#waiting.get(id);
    if (!waiter) return;
    const action = event.Action ?? event.status;
    if (action === 'oom' || action === 'kill') {
      if (action === 'oom') waiter.oom = true;
      else waiter.killed = true;
      return;
    }
    // A `die` without an exit code (a start that failed: moby daemon/start.go) is left to the wait.
    const code = event.Actor?.Attributes?.exitCode;
    if (action !== 'die' || code === undefined || !/^-?\d+$/.test(code)) return;
    waiter.resolve({ StatusCode: Number(code), oomKilled: waiter.oom, killed: waiter.killed });
  }

  /** Closes the connection once no exit is awaited any more (after this turn: the next step's start may register at once). */
  #closeWhenIdle(): void {
    if (this.#closeScheduled) return;
    this.#closeScheduled = true;
    setImmediate(() => {
      this.#closeScheduled = false;
      if (this.#waiting.size > 0) return;
      this.#stream?.destroy();
      this.#stream = undefined;
    });
  }
}
