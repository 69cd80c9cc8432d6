import type { Readable } from 'node:stream';
import type { Context } from '@berth/context';
import type Docker from 'dockerode';
import { engineCall } from './call.ts';
import { type EngineDescription, engineMessage, isUnavailable, runtimeError, statusOf, type Where } from './errors.ts';

/** One line of the engine's pull progress. */
export interface PullProgress {
  status: string;
  id?: string;
  current?: number;
  total?: number;
}

/** A line of `POST /images/create` output, as the engine writes it. */
interface ProgressLine {
  status?: string;
  id?: string;
  progressDetail?: { current?: number; total?: number };
  error?: string;
  errorDetail?: { message?: string };
}

const NOT_FOUND = /manifest unknown|not found: manifest|repository does not exist|no such image|pull access denied/i;

/**
 * Pulls `repository` at `tagOrDigest` and resolves when the engine says the pull is over.
 *
 * The engine reports most pull failures inside its progress stream with status 200 (dockerode's
 * `followProgress` then calls back without an error): this reads the stream itself and rejects
 * with `ImagePullFailed` (or `ImageNotFound` when the registry has no such image) carrying the
 * engine's message. On ctx done the request is aborted and the promise rejects at once.
 */
export async function pullImage(
  ctx: Context,
  docker: Docker,
  engine: EngineDescription,
  where: Where,
  image: { repository: string; tagOrDigest: string; reference: string },
  onProgress: (progress: PullProgress) => void,
): Promise<void> {
  await engineCall(ctx, where, engine, async (signal) => {
    let stream: Readable;
    try {
      stream = (await docker.createImage({ fromImage: image.repository, tag: image.tagOrDigest, abortSignal: signal })) as Readable;
    } catch (error) {
      const status = statusOf(error);
      if (status === undefined || signal.aborted || isUnavailable(error)) throw error;
      // Refused before any progress (bad reference, unknown registry host, …): the engine's message says why.
      const message = engineMessage(error);
      const code = status === 400 ? 'InvalidConfig' : status === 404 || NOT_FOUND.test(message) ? 'ImageNotFound' : 'ImagePullFailed';
      throw runtimeError(code, `pulling image "${image.reference}" failed: ${message}`, where, error);
    }
    const failure = await readProgress(stream, signal, onProgress);
    if (failure !== undefined) {
      const code = NOT_FOUND.test(failure) ? 'ImageNotFound' : 'ImagePullFailed';
      throw runtimeError(code, `pulling image "${image.reference}" failed: ${failure}`, where);
    }
  });
}

/** Reads newline-delimited JSON progress; resolves with the error message if the engine reported one. */
function readProgress(stream: Readable, signal: AbortSignal, onProgress: (progress: PullProgress) => void): Promise<string | undefined> {
  return new Promise<string | undefined>((resolve, reject) => {
    let buffered = '';
    let failure: string | undefined;
    let settled = false;
    const finish = (error?: Error): void => {
      if (settled) return;
      settled = true;
      signal.removeEventListener('abort', onAbort);
      stream.off('data', onData);
      if (error !== undefined) {
        reject(error);
      } else {
        if (buffered.trim()) handleLine(buffered);
        resolve(failure);
      }
    };
    const handleLine = (line: string): void => {
      const text = line.trim();
      if (!text) return;
      let parsed: ProgressLine;
      try {
        parsed = JSON.parse(text) as ProgressLine;
      } catch {
        return; // not JSON (a proxy's banner?): ignore, as the docker CLI does
      }
      if (parsed.error || parsed.errorDetail?.message) {
        failure ??= (parsed.errorDetail?.message ?? parsed.error ?? '').trim();
        return;
      }
      if (parsed.status) {
        const detail = parsed.progressDetail;
        onProgress({
          status: parsed.status,
          ...(parsed.id ? { id: parsed.id } : {}),
          ...(typeof detail?.current === 'number' ? { current: detail.current } : {}),
          ...(typeof detail?.total === 'number' ? { total: detail.total } : {}),
        });
      }
    };
    const onData = (chunk: Buffer | string): void => {
      buffered += chunk.toString();
      let newline: number;
      while ((newline = buffered.indexOf('\n')) >= 0) {
        const line = buffered.slice(0, newline);
        buffered = buffered.slice(newline + 1);
        handleLine(line);
      }
    };
    const onAbort = (): void => {
      stream.destroy();
      finish(signal.reason instanceof Error ? signal.reason : new Error('pull aborted'));
    };
    stream.on('data', onData);
    stream.once('end', () => finish());
    stream.once('error', (error: Error) => finish(error));
    stream.once('close', () => {
      if (!stream.readableEnded) finish(Object.assign(new Error('the pull stream closed before it ended'), { code: 'ECONNRESET' }));
    });
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
  });
}
