/**
 * Follows one container's log through the API server with the kubeconfig's credentials, resuming a
 * dropped stream from where it stopped: not client-node's `Log` (its abort crashes the process in
 * 2.0.1 and never ends the destination).
 */
import http from 'node:http';
import https from 'node:https';
import { Readable } from 'node:stream';
import type { KubeConfig } from '@kubernetes/client-node';
import type { Context } from '@berth/context';
import type { RuntimeError } from '@berth/runtime';
import { contextError, runtimeError, type Where } from './errors.ts';

/** What the follower needs to know about the container. */
export interface FollowTarget {
  kc: KubeConfig;
  namespace: string;
  podName: string;
  containerName: string;
  /** Resolves true once the step's own image runs or ran, false when it finished without starting; rejects when ctx ends. */
  waitStarted(): Promise<boolean>;
  /** True once the container exited (or failed, or its pod is gone): a stream that then ends normally is complete. */
  isFinished(): boolean;
  /** True when the pod is gone: a 404 then means there is nothing more to read. */
  isGone(): boolean;
  /** Resolves when `isFinished()` turns true or `ms` passed, whichever first (never rejects). */
  waitFinished(ms: number): Promise<void>;
  /**
   * True once the step's container instance was replaced by another (the pause image, after
   * removeContainer): following the container by name would then follow the newcomer forever.
   */
  isReplaced(): boolean;
  /** Calls `listener` after every change of the container's state; returns the unsubscribe function. */
  onChange(listener: () => void): () => void;
}

/** Counters of one follower, for tests. */
export interface FollowStats {
  requests: number;
  resumes: number;
  linesSkipped: number;
}

const TIMESTAMP = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)$/;

/** An RFC 3339 timestamp (nanosecond precision allowed) as nanoseconds since the epoch, or undefined. */
export function timestampNanos(text: string): bigint | undefined {
  const match = TIMESTAMP.exec(text);
  if (!match) return undefined;
  const ms = Date.parse(`${match[1]}${match[3]}`);
  if (Number.isNaN(ms)) return undefined;
  return BigInt(ms) * 1_000_000n + BigInt((match[2] ?? '').padEnd(9, '0'));
}

/** `sinceTime` for a resume: the timestamp floored to the second (the API server parses whole seconds). */
export function sinceTimeOf(nanos: bigint): string {
  const seconds = nanos / 1_000_000_000n;
  return new Date(Number(seconds) * 1000).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/**
 * Splits `timestamps=true` log output into lines, strips the timestamps, and on a resume skips what
 * was already delivered: every line older than the last timestamp seen, and as many lines at that
 * timestamp as were seen (several lines can share one timestamp).
 *
 * A line still partial when a stream ends is carried into the next one. If the next stream serves
 * it again (same timestamp: a cut stream re-read from the same file) the carried start is
 * dropped; otherwise the kubelet rotated the log under the follow and the start is in a file no
 * request serves again (kubernetes/kubernetes staging cri-client pkg/logs/logs.go ReadLogs reads
 * only the current file, and stops at the old file's end once the container exited): the first
 * line of the next stream is its continuation, and the two are joined.
 */
export class TimestampedLines {
  #partial: Buffer | undefined;
  /** A partial line from the previous stream: its timestamp text and its content (timestamp removed). */
  #carried: { text: string; content: Buffer } | undefined;
  #lastText: string | undefined;
  #countAtLast = 0;
  #skipBefore: bigint | undefined;
  #skipAtLast = 0;
  skipped = 0;

  /** The `sinceTime` to resume from, or undefined when nothing was delivered yet. */
  resumeFrom(): string | undefined {
    if (this.#lastText === undefined) return undefined;
    const nanos = timestampNanos(this.#lastText);
    return nanos === undefined ? undefined : sinceTimeOf(nanos);
  }

  /** Starts a new stream: carries a partial line over (see the class), and arms skipping if something was delivered. */
  restart(): void {
    const partial = this.#partial;
    this.#partial = undefined;
    if (partial !== undefined) {
      const space = partial.indexOf(32);
      const text = space > 0 && space <= 40 ? partial.toString('latin1', 0, space) : '';
      if (TIMESTAMP.test(text)) {
        const content = partial.subarray(space + 1);
        // A line already carried once and still partial grows by what this stream added.
        this.#carried =
          this.#carried !== undefined && this.#carried.text !== text
            ? { text: this.#carried.text, content: Buffer.concat([this.#carried.content, content]) }
            : { text, content: Buffer.from(content) };
      }
    }
    if (this.#lastText !== undefined) {
      this.#skipBefore = timestampNanos(this.#lastText);
      this.#skipAtLast = this.#countAtLast;
    }
  }

  /** The content of the complete lines in `chunk` (plus what was buffered), timestamps removed. */
  push(chunk: Buffer): Buffer {
    const data = this.#partial ? Buffer.concat([this.#partial, chunk]) : chunk;
    const out: Buffer[] = [];
    let start = 0;
    for (;;) {
      const newline = data.indexOf(10, start);
      if (newline < 0) break;
      const piece = this.#line(data.subarray(start, newline + 1));
      if (piece) out.push(piece);
      start = newline + 1;
    }
    this.#partial = start < data.length ? Buffer.from(data.subarray(start)) : undefined;
    return out.length === 1 ? (out[0] as Buffer) : Buffer.concat(out);
  }

  /** The final line without a newline, when the stream ended for good. */
  flush(): Buffer {
    const partial = this.#partial;
    this.#partial = undefined;
    const last = partial ? (this.#line(partial) ?? Buffer.alloc(0)) : Buffer.alloc(0);
    const carried = this.#carried;
    this.#carried = undefined;
    return carried === undefined ? last : Buffer.concat([carried.content, last]);
  }

  #line(line: Buffer): Buffer | undefined {
    const space = line.indexOf(32);
    const text = space > 0 && space <= 40 ? line.toString('latin1', 0, space) : '';
    if (text === '' || !TIMESTAMP.test(text)) return line; // no timestamp: pass through
    if (this.#skipBefore !== undefined) {
      const nanos = timestampNanos(text) ?? 0n;
      if (nanos < this.#skipBefore || (nanos === this.#skipBefore && this.#skipAtLast > 0)) {
        if (nanos === this.#skipBefore) this.#skipAtLast--;
        this.skipped++;
        return undefined;
      }
      this.#skipBefore = undefined;
    }
    // A carried start served again goes; otherwise this line is its continuation (counted under its own timestamp).
    const carried = this.#carried;
    this.#carried = undefined;
    if (text === this.#lastText) this.#countAtLast++;
    else {
      this.#lastText = text;
      this.#countAtLast = 1;
    }
    const content = line.subarray(space + 1);
    return carried === undefined || carried.text === text ? content : Buffer.concat([carried.content, content]);
  }
}

interface ReadResult {
  /** `replaced`: the read was cut because the container it followed is no longer the step's. */
  kind: 'ended' | 'failed' | 'replaced';
  status?: number;
  error?: unknown;
  gotData: boolean;
}

/**
 * A Readable of the container's combined output from its start. Resumes with `sinceTime` when a
 * stream ends before the container did, without duplicating or losing lines; ends once a stream
 * that began after the container finished has ended. Destroyed with `Canceled`/`DeadlineExceeded`
 * when ctx ends.
 */
export function followLogs(ctx: Context, where: Where, target: FollowTarget, stats?: FollowStats): Readable {
  const lines = new TimestampedLines();
  let request: http.ClientRequest | undefined;
  let response: http.IncomingMessage | undefined;
  let finished = false;
  const output = new Readable({
    highWaterMark: 64 * 1024,
    read() {
      response?.resume();
    },
    destroy(error, callback) {
      finished = true;
      request?.destroy();
      response?.destroy();
      ctx.signal.removeEventListener('abort', onAbort);
      callback(error);
    },
  });
  const onAbort = (): void => {
    if (!output.destroyed) output.destroy(contextError(ctx, where));
  };
  ctx.signal.addEventListener('abort', onAbort, { once: true });

  /** Reads the log once: following the current instance, or (`previous`) the replaced step's, to its end. */
  const readOnce = async (previous = false): Promise<ReadResult> => {
    lines.restart();
    const since = lines.resumeFrom();
    const cluster = target.kc.getCurrentCluster();
    if (!cluster) return { kind: 'failed', error: new Error('no current cluster'), gotData: false };
    const url = new URL(
      `${cluster.server.replace(/\/$/, '')}/api/v1/namespaces/${encodeURIComponent(target.namespace)}/pods/${encodeURIComponent(target.podName)}/log`,
    );
    url.searchParams.set('container', target.containerName);
    if (previous) url.searchParams.set('previous', 'true');
    else url.searchParams.set('follow', 'true');
    url.searchParams.set('timestamps', 'true');
    if (since) url.searchParams.set('sinceTime', since);
    const options: https.RequestOptions = { method: 'GET', headers: {} };
    await target.kc.applyToHTTPSOptions(options);
    // One connection per stream, closed with it: no pooled socket outlives the container's log.
    options.agent = false;
    options.headers = { ...options.headers, Connection: 'close' };
    if (finished) return { kind: 'ended', gotData: false };
    if (stats) stats.requests++;
    return new Promise<ReadResult>((resolve) => {
      let gotData = false;
      let settled = false;
      // A follow of a replaced container would follow its successor: cut it, the previous read that
      // follows delivers what this one had not (the timestamps skip what it had).
      const unsubscribe = previous
        ? () => undefined
        : target.onChange(() => {
            if (!settled && target.isReplaced()) {
              request?.destroy();
              settle({ kind: 'replaced', gotData: false });
            }
          });
      const settle = (result: ReadResult): void => {
        if (settled) return;
        settled = true;
        unsubscribe();
        request = undefined;
        response = undefined;
        resolve(result);
      };
      const transport = url.protocol === 'http:' ? http : https;
      const req = transport.request(url, options, (res) => {
        if (res.statusCode !== 200) {
          let body = '';
          res.setEncoding('utf8');
          res.on('data', (text: string) => {
            if (body.length < 2_000) body += text;
          });
          res.on('end', () => settle({ kind: 'failed', status: res.statusCode ?? 0, error: new Error(body.trim() || `HTTP ${res.statusCode}`), gotData }));
          res.on('error', (error) => settle({ kind: 'failed', status: res.statusCode ?? 0, error, gotData }));
          return;
        }
        response = res;
        res.on('data', (chunk: Buffer) => {
          if (finished || settled) return;
          const content = lines.push(chunk);
          if (content.length > 0) {
            gotData = true;
            if (!output.push(content)) res.pause();
          }
        });
        res.on('end', () => settle({ kind: 'ended', gotData }));
        res.on('error', (error) => settle({ kind: 'failed', error, gotData }));
        res.on('close', () => settle(res.complete ? { kind: 'ended', gotData } : { kind: 'failed', error: new Error('log stream cut'), gotData }));
      });
      request = req;
      req.on('error', (error) => settle({ kind: 'failed', error, gotData }));
      req.end();
    });
  };

  const run = async (): Promise<void> => {
    // The pause container's output is not the step's: follow only once the step's image runs.
    if (!(await target.waitStarted())) {
      if (!finished) output.push(null);
      return;
    }
    let failures = 0;
    let quiet = 0;
    for (;;) {
      if (finished) return;
      if (target.isReplaced()) return readReplaced();
      const finishedAtStart = target.isFinished();
      const result = await readOnce();
      if (finished) return;
      if (result.kind === 'replaced') return readReplaced();
      if (result.kind === 'ended') {
        failures = 0;
        if (finishedAtStart) {
          if (stats) stats.linesSkipped += lines.skipped;
          const tail = lines.flush();
          if (tail.length > 0) output.push(tail);
          output.push(null);
          return;
        }
        quiet = result.gotData ? 0 : quiet + 1;
        if (stats) stats.resumes++;
        await target.waitFinished(quiet === 0 ? 50 : Math.min(2_000, 50 * 2 ** quiet));
        continue;
      }
      // A failed request or a cut stream.
      if (result.gotData) failures = 0;
      failures++;
      if ((result.status === 404 || result.status === 400) && target.isGone()) {
        output.push(null);
        return;
      }
      if (target.isFinished() && failures > 8) {
        output.destroy(logError(where, result));
        return;
      }
      if (stats) stats.resumes++;
      await target.waitFinished(Math.min(2_000, 50 * 2 ** Math.min(failures, 6)));
    }
  };
  /** The step's container was replaced: read its log as the previous instance, once, and end. */
  const readReplaced = async (): Promise<void> => {
    for (let attempt = 1; ; attempt++) {
      const result = await readOnce(true);
      if (finished) return;
      // A 400 means the kubelet no longer has the previous instance: what was delivered is all there is.
      if (result.kind === 'ended' || result.status === 400 || result.status === 404 || attempt >= 4) {
        if (result.kind === 'ended') {
          const tail = lines.flush();
          if (tail.length > 0) output.push(tail);
        }
        if (stats) stats.linesSkipped += lines.skipped;
        output.push(null);
        return;
      }
      if (stats) stats.resumes++;
      await new Promise((resolve) => setTimeout(resolve, 100 * attempt));
    }
  };

  run().catch((error: unknown) => {
    if (!output.destroyed) output.destroy(ctx.signal.aborted ? contextError(ctx, where) : runtimeError('Internal', String(error), where, error));
  });
  return output;
}

function logError(where: Where, result: ReadResult): RuntimeError {
  const detail = result.error instanceof Error ? result.error.message : String(result.error);
  return runtimeError(
    result.status === 404 ? 'NotFound' : 'Unavailable',
    `reading the log failed${result.status ? ` (HTTP ${result.status})` : ''}: ${detail}`,
    where,
    result.error,
  );
}
