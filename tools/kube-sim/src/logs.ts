// pods/log served from Docker's logs of the container, as the kubelet serves its log files:
// stdout and stderr in one stream, follow, previous, tailLines, limitBytes, sinceSeconds,
// sinceTime (forwarded by the API server at whole seconds, so a resuming client must drop
// lines it already has: compare timestamps), timestamps as fixed-width RFC3339Nano prefixes.

import type Docker from 'dockerode';
import { type ServerResponse } from 'node:http';
import { type Readable } from 'node:stream';
import { type NodeAgent } from './agent/node-agent.ts';
import { type Counters } from './counters.ts';
import { type Faults } from './faults.ts';
import { badRequest } from './status.ts';
import { type Pod } from './types.ts';
import { queryBool, queryInt } from './api/http.ts';

/** What the log handler needs. */
export interface LogDeps {
  docker: Docker;
  agent: NodeAgent;
  counters: Counters;
  faults: Faults;
}

/** Normalises a Docker timestamp to RFC3339 with exactly nine fractional digits (the kubelet's format). */
function fixedNano(ts: string): string {
  const m = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?Z$/.exec(ts);
  if (!m) return ts;
  return `${m[1]}.${(m[2] ?? '').padEnd(9, '0').slice(0, 9)}Z`;
}

function fromDate(date: Date): string {
  return fixedNano(date.toISOString());
}

/** Splits Docker's multiplexed (non-TTY) log stream into frames. */
class FrameParser {
  #buffer: Buffer = Buffer.alloc(0);

  /** Adds bytes; returns the complete frames' payloads. */
  push(chunk: Buffer): Buffer[] {
    this.#buffer = this.#buffer.length === 0 ? chunk : Buffer.concat([this.#buffer, chunk]);
    const frames: Buffer[] = [];
    while (this.#buffer.length >= 8) {
      const size = this.#buffer.readUInt32BE(4);
      if (this.#buffer.length < 8 + size) break;
      frames.push(this.#buffer.subarray(8, 8 + size));
      this.#buffer = this.#buffer.subarray(8 + size);
    }
    return frames;
  }
}

/** Serves GET pods/{name}/log. */
export async function serveLog(deps: LogDeps, pod: Pod, url: URL, res: ServerResponse): Promise<void> {
  const q = url.searchParams;
  const podName = pod.metadata.name ?? '';
  const names = pod.spec.containers.map((c) => c.name);
  let container = q.get('container') ?? undefined;
  if (!container) {
    if (names.length !== 1) {
      throw badRequest(`a container name must be specified for pod ${podName}, choose one of: [${names.join(' ')}]`);
    }
    container = names[0] ?? '';
  }
  const follow = queryBool(q.get('follow'));
  const previous = queryBool(q.get('previous'));
  const timestamps = queryBool(q.get('timestamps'));
  const tailLines = queryInt('tailLines', q.get('tailLines'));
  const limitBytes = queryInt('limitBytes', q.get('limitBytes'));
  const sinceSeconds = queryInt('sinceSeconds', q.get('sinceSeconds'));
  const sinceTimeRaw = q.get('sinceTime');
  if (sinceSeconds !== undefined && sinceTimeRaw)
    throw badRequest('PodLogOptions "" is invalid: sinceSeconds: Forbidden: at most one of `sinceTime` or `sinceSeconds` may be specified');
  if (sinceSeconds !== undefined && sinceSeconds < 1) throw badRequest('PodLogOptions "" is invalid: sinceSeconds: Invalid value: must be greater than 0');
  if (tailLines !== undefined && tailLines < 0) throw badRequest('PodLogOptions "" is invalid: tailLines: Invalid value: must be greater than or equal to 0');
  if (limitBytes !== undefined && limitBytes < 1) throw badRequest('PodLogOptions "" is invalid: limitBytes: Invalid value: must be greater than 0');
  let since: string | undefined;
  if (sinceTimeRaw) {
    const ms = Date.parse(sinceTimeRaw);
    if (Number.isNaN(ms)) throw badRequest(`sinceTime: invalid value "${sinceTimeRaw}": must be RFC3339`);
    // The API server forwards sinceTime to the kubelet formatted as RFC3339: whole seconds.
    since = fromDate(new Date(Math.floor(ms / 1000) * 1000));
  } else if (sinceSeconds !== undefined) {
    since = fromDate(new Date(Date.now() - sinceSeconds * 1000));
  }

  const dockerId = deps.agent.logTarget(pod, container, previous);
  const target = deps.docker.getContainer(dockerId);
  const sinceUnix = since ? Math.max(0, Math.floor(Date.parse(since) / 1000) - 1) : undefined;
  const base = {
    stdout: true,
    stderr: true,
    timestamps: true,
    ...(tailLines !== undefined ? { tail: tailLines } : sinceUnix !== undefined ? { since: sinceUnix } : {}),
  };

  deps.counters.logStream();
  const parser = new FrameParser();
  let written = 0;
  let finished = false;
  const cutAt = deps.faults.logCutAfterBytes;
  const holder: { source?: Readable } = {};

  res.writeHead(200, { 'content-type': 'text/plain', 'cache-control': 'no-cache, private', 'transfer-encoding': 'chunked' });
  res.flushHeaders();

  const finish = (cut: boolean): void => {
    if (finished) return;
    finished = true;
    holder.source?.destroy();
    if (cut) res.destroy();
    else res.end();
  };

  const emit = (payloads: Buffer[]): void => {
    for (const payload of payloads) {
      if (finished) return;
      const text = payload.toString('utf8');
      const space = text.indexOf(' ');
      const ts = fixedNano(space >= 0 ? text.slice(0, space) : text);
      if (since && ts < since) continue;
      let out = Buffer.from(timestamps ? `${ts} ${text.slice(space + 1)}` : text.slice(space + 1), 'utf8');
      let stop = false;
      if (limitBytes !== undefined && written + out.length >= limitBytes) {
        out = out.subarray(0, limitBytes - written);
        stop = true;
      }
      let cut = false;
      if (cutAt !== null && written + out.length >= cutAt) {
        out = out.subarray(0, Math.max(0, cutAt - written));
        cut = true;
      }
      if (out.length > 0) {
        res.write(out);
        written += out.length;
        deps.counters.logBytes(out.length);
      }
      if (cut) return finish(true);
      if (stop) return finish(false);
    }
  };

  if (!follow) {
    const all = await target.logs({ ...base, follow: false });
    emit(parser.push(Buffer.isBuffer(all) ? all : Buffer.from(all as unknown as string)));
    finish(false);
    return;
  }
  const stream = (await target.logs({ ...base, follow: true })) as unknown as Readable;
  holder.source = stream;
  res.on('close', () => {
    finished = true;
    stream.destroy();
  });
  stream.on('data', (chunk: Buffer) => emit(parser.push(chunk)));
  stream.on('end', () => finish(false));
  stream.on('error', () => finish(true));
}
