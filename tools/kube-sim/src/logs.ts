// pods/log served from Docker's logs of the container, as the kubelet serves its log files:
// stdout and stderr in one stream, follow, previous, tailLines, limitBytes, sinceSeconds,
// sinceTime (forwarded by the API server at whole seconds, so a resuming client must drop
// lines it already has: compare timestamps), timestamps as fixed-width RFC3339Nano prefixes.
// Only the container's current log file is served, and a follow crosses a log rotation as the
// kubelet's ReadLogs does (agent/log-rotation.ts, and serveLog below).

import type Docker from 'dockerode';
import { type ServerResponse } from 'node:http';
import { type Readable } from 'node:stream';
import { type ContainerLogManager } from './agent/log-rotation.ts';
import { type NodeAgent } from './agent/node-agent.ts';
import { type Counters } from './counters.ts';
import { type Faults } from './faults.ts';
import { FrameParser, fromDate, splitRecord } from './log-records.ts';
import { badRequest } from './status.ts';
import { type Pod } from './types.ts';
import { queryBool, queryInt } from './api/http.ts';

/** What the log handler needs. */
export interface LogDeps {
  docker: Docker;
  agent: NodeAgent;
  counters: Counters;
  faults: Faults;
  /** The kubelet's log rotation; null when off. */
  logs: ContainerLogManager | null;
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

  // Only the current log file is served: the kubelet's GetContainerLogs reads the container's
  // log path (staging cri-client pkg/logs/logs.go ReadLogs opens `path`), never a rotated file.
  // Docker's tail of the whole log, cut at the latest rotation, is the current file's tail.
  let fileStart = deps.logs?.currentFileStart(dockerId);
  /**
   * The first rotation that happened while this follow lagged behind the writer. ReadLogs
   * follows the file it opened to its end; only at that end, in waitLogs, does it ask whether
   * the container still runs (isContainerRunning) and then take the directory watch's events,
   * the rotation's Create of the log name among them, upon which it opens the path anew. So:
   * - a follow that is caught up when the log rotates goes on with the new file, nothing lost;
   * - one that lags (its client reads slower than the container writes) reads the old file to
   *   its end, and then, if the container has exited meanwhile, ENDS THERE: what the container
   *   wrote to the new file is not sent (a new request, which reads the current file, gets it);
   * - if the container still runs, it opens the path: the newest file, so a file rotated while
   *   it was still reading an older one is skipped whole.
   */
  let pendingCut: string | undefined;
  /** Timestamp of the last record this follow has read (served or not). */
  let lastSeen: string | undefined;

  const emit = (payloads: Buffer[]): void => {
    for (const payload of payloads) {
      if (finished) return;
      const { ts, content } = splitRecord(payload);
      lastSeen = ts;
      if (pendingCut !== undefined && ts > pendingCut) {
        // The end of the rotated file: waitLogs → isContainerRunning.
        if (!deps.agent.containerRunning(dockerId)) {
          deps.logs?.noteFollowEnded();
          return finish(false);
        }
        fileStart = deps.logs?.currentFileStart(dockerId);
        if (fileStart !== undefined && fileStart > pendingCut) deps.logs?.noteFileSkipped();
        pendingCut = undefined;
      }
      if (fileStart !== undefined && ts <= fileStart) continue;
      if (since && ts < since) continue;
      let out = timestamps ? Buffer.concat([Buffer.from(`${ts} `), content]) : content;
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
  // The kubelet writes to the client as it reads the file, so a slow client holds its reading
  // back. kube-sim reads Docker's stream at once (Docker 20.10's follow can end short of the log
  // when its reader is slow as the container stops) and keeps what the client has not taken yet
  // in `backlog`: records there are ones this follow "has not read yet".
  const backlog: Buffer[] = [];
  let next = 0;
  let sourceEnded = false;
  let waitingDrain = false;
  const pump = (): void => {
    while (!finished && next < backlog.length) {
      if (res.writableNeedDrain) {
        if (!waitingDrain) {
          waitingDrain = true;
          res.once('drain', () => {
            waitingDrain = false;
            pump();
          });
        }
        return;
      }
      const payload = backlog[next++];
      if (payload) emit([payload]);
    }
    if (next >= backlog.length) {
      backlog.length = 0;
      next = 0;
    } else if (next > 4096) {
      backlog.splice(0, next);
      next = 0;
    }
    if (!finished && sourceEnded && backlog.length === 0) finish(false);
  };
  const unsubscribe = deps.logs?.onRotate(dockerId, (cut) => {
    // Caught up: ReadLogs waits at the end of the file and takes the Create at once. Behind (its
    // client reads slower than the container writes, or it has not yet read every record the
    // rotated file holds): it reads on to that file's end first.
    const caughtUp = next >= backlog.length && lastSeen !== undefined && lastSeen >= cut;
    if (!caughtUp) pendingCut ??= cut;
  });
  res.on('close', () => {
    finished = true;
    unsubscribe?.();
    stream.destroy();
  });
  stream.on('data', (chunk: Buffer) => {
    for (const payload of parser.push(chunk)) backlog.push(payload);
    pump();
  });
  stream.on('end', () => {
    sourceEnded = true;
    pump();
  });
  stream.on('error', () => finish(true));
}
