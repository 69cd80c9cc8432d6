/**
 * A container's log: the live stream of its attach, opened before the container starts, and the
 * engine's json-file log (`GET /containers/{id}/logs`) for what the attach cannot give.
 */
import type { Readable } from 'node:stream';
import { afterFunc, type Context } from '@berth/context';
import { isRuntimeError } from '@berth/runtime';
import type Docker from 'dockerode';
import type { EngineConnection } from './connection.ts';
import { compareTimestamps, DockerLogDemuxer, type LogContinuation } from './demux.ts';
import { lastFrameTimestamp } from './engine-answers.ts';
import { getEngineStream } from './engine-stream.ts';
import { contextError, type EngineDescription, engineMessage, isUnavailable, runtimeError, toRuntimeError, type Where } from './errors.ts';

/** How long a live stream may hold the container (its output unread) before it is given up for the log file. */
export const DEFAULT_LOG_STALL_MS = 5_000;

/** How many bytes of a container's live stream are read ahead of a slow reader before it holds the container. */
export const DEFAULT_LOG_BUFFER_BYTES = 1024 * 1024;

/** One engine call under a ctx, as the runtime makes them (its `#call`). */
type EngineCaller = <T>(ctx: Context, where: Where, fn: (signal: AbortSignal) => Promise<T>) => Promise<T>;

/**
 * The container's attach (`POST /containers/{id}/attach?stream=1&stdout=1&stderr=1`), opened by
 * runContainer before the start and held until tailContainer claims it. Its bytes wait in the
 * socket meanwhile; the engine then holds the container's output (it writes to every attached
 * stream in turn, the log file included), so an attach nobody claims is given up after `stallMs`
 * once it is full, and the log is read from the file instead.
 */
export class PendingAttach {
  #socket: Readable | undefined;
  #timer: NodeJS.Timeout | undefined;
  #fullSince = 0;

  constructor(socket: Readable, stallMs: number) {
    this.#socket = socket;
    socket.on('error', ignore);
    socket.once('close', () => this.#stopTimer());
    this.#timer = setInterval(
      () => {
        const held = this.#socket;
        if (held === undefined) return;
        // Node reads the socket up to its high-water mark; past that the engine is the one waiting.
        if (held.readableLength < held.readableHighWaterMark) {
          this.#fullSince = 0;
          return;
        }
        const now = Date.now();
        if (this.#fullSince === 0) this.#fullSince = now;
        else if (now - this.#fullSince >= stallMs) this.close();
      },
      Math.max(10, Math.floor(stallMs / 4)),
    );
    this.#timer.unref();
  }

  /** The attach's stream, once: undefined when it was claimed, closed or given up. */
  claim(): Readable | undefined {
    const socket = this.#socket;
    this.#stopTimer();
    this.#socket = undefined;
    if (socket?.destroyed) return undefined;
    socket?.off('error', ignore);
    return socket;
  }

  /** Releases the attach if nobody claimed it. */
  close(): void {
    this.#stopTimer();
    this.#socket?.destroy();
    this.#socket = undefined;
  }

  #stopTimer(): void {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
  }
}

/**
 * Opens the container's attach and resolves once the engine answered its head, or `undefined`
 * when the engine (or a proxy in front of it) answers in a form read only through dockerode: the
 * log then comes from the log file alone.
 *
 * The engine adds the attach to the container's streams before it answers with the head (moby
 * daemon/attach.go `ContainerAttach`: `StreamConfig.AttachStreams`, then `GetStreams`, which
 * writes the head), so once the head arrived every byte the container writes after its start
 * reaches the attach: started afterwards, nothing is missed. `docker run` relies on the same order.
 * With `stdin` (a held container, created with `OpenStdin`), the engine also copies what is written
 * to the connection to the container's stdin, and closes that stdin when the connection's write side
 * ends (`StdinOnce`; moby container/stream/attach.go `CopyStreams`): the returned stream is then the
 * connection itself, a Duplex.
 */
export async function openAttach(connection: EngineConnection, name: string, signal: AbortSignal, stdin = false): Promise<Readable | undefined> {
  const path = `/containers/${encodeURIComponent(name)}/attach?stream=1&stdout=1&stderr=1${stdin ? '&stdin=1' : ''}`;
  return getEngineStream(connection.dial, connection.host, path, signal, 'POST');
}

/** What {@link tailLogs} needs from the runtime. */
export interface TailDependencies {
  readonly ctx: Context;
  readonly where: Where;
  readonly connection: EngineConnection;
  readonly engine: EngineDescription;
  readonly handle: Docker.Container;
  readonly call: EngineCaller;
  /** The attach runContainer opened, claimed by this tail (undefined: the log file alone). */
  readonly attach: Readable | undefined;
  readonly stallMs: number;
  /** How many bytes of the attach are read ahead of a slow reader (DockerLogDemuxer's `liveBufferBytes`). */
  readonly bufferBytes: number;
  /** Whether the container may still be running (its exit not seen): only then does a slow reader hold it. */
  readonly running: () => boolean;
}

/**
 * The container's log as one Readable of its bytes.
 *
 * With an attach: its bytes, live, read ahead of a slow reader up to `bufferBytes`; when it ends the
 * container's streams have closed and the log is whole. When it is lost (the connection dropped, or
 * a reader `bufferBytes` behind for `stallMs` gave it up), the
 * log file is read from its start with timestamps, skipping as many bytes of each stream as the
 * attach delivered: the file holds the same bytes per stream, so nothing is lost or repeated at the
 * seam (only the order between stdout and stderr near it is the file's).
 *
 * Without one (the container was started elsewhere, or its attach was claimed by an earlier tail):
 * the log file, followed. dockerd 20.10 can end a follow early when the container exits just as the
 * stream opens; the tail then asks for the last line's timestamp and reads on from the last one it
 * delivered (`since`, frames up to it dropped), or from the start with the byte counts when it has
 * delivered none with a timestamp.
 */
export async function tailLogs(deps: TailDependencies): Promise<Readable> {
  const { ctx, where, connection, engine, handle, call } = deps;
  const follow = (since: string | undefined): Promise<Readable> =>
    call(ctx, where, async (signal) => {
      const query = { follow: true as const, stdout: true, stderr: true, timestamps: true, ...(since ? { since } : {}) };
      const path = `/containers/${encodeURIComponent(handle.id)}/logs?${new URLSearchParams(Object.entries(query).map(([k, v]): [string, string] => [k, String(v)])).toString()}`;
      return (
        (await getEngineStream(connection.dial, connection.host, path, signal)) ??
        ((await handle.logs({ ...query, abortSignal: signal })) as unknown as Readable)
      );
    });
  const fromStart = async (): Promise<LogContinuation> => ({ source: await follow(undefined), timestamps: true, fromStart: true });
  const source = deps.attach ?? (await follow(undefined));
  let continuations = 0;
  const logs = new DockerLogDemuxer(source, {
    timestamps: true,
    live: deps.attach !== undefined,
    // Every source is a connection of this tail's own (the attach, the log file's stream).
    reuseChunks: true,
    stallMs: deps.stallMs,
    liveBufferBytes: deps.bufferBytes,
    holds: deps.running,
    mapError: (error) =>
      isUnavailable(error) && !ctx.signal.aborted
        ? runtimeError('Unavailable', `the log stream broke: ${engineMessage(error)}. Was dockerd stopped or restarted? Check ${engine.source}.`, where, error)
        : toRuntimeError(error, ctx, where, engine),
    continueWith: async (lastTimestamp, progress) => {
      // The attach ended cleanly. The engine ends it when the container's streams close, as the
      // container ends; a connection cut on the way (a proxy, a dying dockerd) ends it alike. So
      // the container must have ended too: else read on from the file.
      let lost = progress.lost;
      if (deps.attach !== undefined && continuations === 0 && !lost) {
        if (await ended(deps)) return undefined;
        lost = true;
      }
      if (continuations++ >= 5) return undefined;
      try {
        // The attach lost: the whole log file, skipping what the attach delivered (it has no timestamps).
        if (lost) return await fromStart();
        const tail = await call(
          ctx,
          where,
          async (signal) => (await handle.logs({ follow: false, stdout: true, stderr: true, timestamps: true, tail: 1, abortSignal: signal })) as unknown,
        );
        const last = lastFrameTimestamp(Buffer.isBuffer(tail) ? tail : Buffer.from(typeof tail === 'string' ? tail : ''));
        if (last === undefined || (lastTimestamp !== undefined && compareTimestamps(last, lastTimestamp) <= 0)) return undefined;
        // From the earliest of the streams' last timestamps, a second early (the file is in
        // timestamp order per stream only); each stream drops what it delivered.
        const earliest = progress.lastTimestamps
          .filter((t): t is string => t !== undefined)
          .map((t) => Date.parse(t))
          .reduce((a, b) => Math.min(a, b), Number.POSITIVE_INFINITY);
        if (!Number.isFinite(earliest)) return await fromStart();
        return { source: await follow(String(Math.floor(earliest / 1000) - 1)), timestamps: true, fromStart: false };
      } catch (error) {
        // Removed meanwhile (404), or being removed (409 "dead or marked for removal"): its log is gone with it.
        if (isRuntimeError(error, 'NotFound', 'AlreadyExists')) return undefined;
        throw error;
      }
    },
  });
  const stop = afterFunc(ctx, () => logs.destroy(contextError(ctx, where)));
  logs.once('close', () => stop());
  return logs;
}

/**
 * Whether the container is no longer running, asked as soon as its attach ended cleanly. The
 * engine closes the attach streams while it handles the container's exit, under the container's
 * lock, and marks it stopped before it lets go (moby daemon/monitor.go `handleContainerExit`:
 * `StreamConfig.Wait`, `Reset` — which closes them — then `SetStopped`); an inspect takes that lock
 * (daemon/inspect.go), so after a real end it sees the container stopped. A container still running
 * means the connection was cut on the way.
 *
 * Gotcha: a cut in the last moment before the container ends (between the cut and this inspect) is
 * taken for the end: what it wrote in that moment is not read from the file.
 */
async function ended(deps: TailDependencies): Promise<boolean> {
  try {
    const info = await deps.call(deps.ctx, deps.where, (signal) => deps.handle.inspect({ abortSignal: signal }));
    return !(info.State.Running || info.State.Paused || info.State.Restarting);
  } catch (error) {
    if (deps.ctx.signal.aborted) throw error;
    // Gone (its log with it), or the engine lost: the log file tells, or the error does.
    return false;
  }
}

function ignore(): void {}
