import type { Duplex, Readable } from 'node:stream';

/** Opens a new connection to the engine (unix socket, TCP or TLS), as {@link connect} resolved it. */
export type Dial = () => Duplex;

/** The most header bytes read before the answer is refused as not HTTP. */
const MAX_HEAD_BYTES = 64 * 1024;
/** The most bytes of an error answer's body kept for the message. */
const MAX_ERROR_BODY_BYTES = 64 * 1024;

/**
 * GETs (or, with `method`, POSTs without a body) `path` (with its query) from the Docker engine over a connection of its own and resolves
 * the answer's body as the connection itself, or `undefined` when the answer is framed in a way
 * this reader does not take (chunked), or refuses HTTP/1.0 (505), so the caller asks again through
 * dockerode.
 *
 * Why: the log endpoint flushes once per log line. Over HTTP/1.1 that is one chunk per line, and
 * Node's HTTP client hands each chunk to JavaScript on its own: for a 256 MiB log of 1 KiB lines,
 * ~1.7 s of CPU in the parser's callbacks, where the docker CLI spends ~0.5 s in all. Asked over
 * HTTP/1.0, the engine's Go server sends the body unframed and closes the connection at its end
 * (net/http `chunkWriter.writeHeader` chunks only for 1.1 requests), so the body arrives in the
 * socket's 64 KiB reads.
 *
 * An error status rejects with what docker-modem would throw (`statusCode`, the engine's `json`),
 * so the runtime's error mapping reads both alike; a socket error rejects with the socket's error
 * (`ECONNREFUSED`, …). `signal` aborts the request until the answer's head has arrived; after
 * that the caller owns the returned stream and destroys it to stop.
 *
 * Gotcha: the stream comes paused (bytes that came with the head wait in it): read it, pipe it or
 * `resume()` it; a 'data' listener alone does not start it.
 */
export function getEngineStream(dial: Dial, host: string, path: string, signal: AbortSignal, method: 'GET' | 'POST' = 'GET'): Promise<Readable | undefined> {
  return new Promise((resolve, reject) => {
    const socket = dial();
    let head: Buffer = Buffer.alloc(0);
    let answer: { status: number; reason: string; headers: Map<string, string>; body: Buffer[]; bodyBytes: number } | undefined;
    const onAbort = (): void => {
      socket.destroy();
      reject(Object.assign(new Error('the request was aborted'), { name: 'AbortError', code: 'ABORT_ERR' }));
    };
    const cleanup = (): void => {
      signal.removeEventListener('abort', onAbort);
      socket.off('data', onData);
      socket.off('end', onEnd);
      socket.off('error', onError);
      socket.off('close', onEnd);
    };
    const drop = (): void => {
      cleanup();
      // A late error of a socket given up on must not become an uncaught exception.
      socket.on('error', ignore);
      socket.destroy();
    };
    const fail = (error: Error): void => {
      drop();
      reject(error);
    };
    /** An answer for dockerode to read: this connection is dropped and the caller asks again. */
    const fallBack = (): void => {
      drop();
      resolve(undefined);
    };
    const onError = (error: Error): void => fail(error);
    // The connection ended ('end' or 'close', whichever comes first) before a body was handed on.
    const onEnd = (): void =>
      fail(
        answer === undefined
          ? Object.assign(new Error('the Docker engine closed the connection before answering'), { code: 'ECONNRESET' })
          : httpError(answer.status, answer.reason, answer.headers, Buffer.concat(answer.body)),
      );
    const onData = (chunk: Buffer): void => {
      if (answer !== undefined) {
        // An error answer: keep the start of its body for the message.
        if (answer.bodyBytes < MAX_ERROR_BODY_BYTES) answer.body.push(chunk);
        answer.bodyBytes += chunk.length;
        return;
      }
      head = head.length === 0 ? chunk : Buffer.concat([head, chunk]);
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) {
        if (head.length > MAX_HEAD_BYTES)
          fail(new Error(`the Docker engine's answer to ${method} ${path} has no end of headers in its first ${MAX_HEAD_BYTES} bytes`));
        return;
      }
      const parsed = parseHead(head.subarray(0, end).toString('latin1'));
      if (parsed === undefined) {
        fail(new Error(`the Docker engine's answer to ${method} ${path} is not HTTP: ${JSON.stringify(head.subarray(0, 80).toString('latin1'))}`));
        return;
      }
      const rest = head.subarray(end + 4);
      // HTTP Version Not Supported: a proxy in front of the engine that takes only HTTP/1.1.
      if (parsed.status === 505) return fallBack();
      if (parsed.status !== 200) {
        answer = { ...parsed, body: [rest], bodyBytes: rest.length };
        const length = Number(parsed.headers.get('content-length'));
        if (Number.isInteger(length) && answer.bodyBytes >= length) onEnd();
        return;
      }
      // Not what an engine sends to an HTTP/1.0 request; a proxy in between may.
      if (/chunked/i.test(parsed.headers.get('transfer-encoding') ?? '')) return fallBack();
      cleanup();
      socket.pause();
      if (rest.length > 0) socket.unshift(rest);
      resolve(socket);
    };
    if (signal.aborted) {
      onAbort();
      return;
    }
    signal.addEventListener('abort', onAbort, { once: true });
    socket.on('data', onData);
    socket.on('end', onEnd);
    socket.on('error', onError);
    socket.on('close', onEnd);
    const length = method === 'POST' ? 'Content-Length: 0\r\n' : '';
    socket.write(`${method} ${path} HTTP/1.0\r\nHost: ${host}\r\nUser-Agent: berth\r\nAccept: application/vnd.docker.multiplexed-stream\r\n${length}\r\n`);
  });
}

function parseHead(text: string): { status: number; reason: string; headers: Map<string, string> } | undefined {
  const [statusLine = '', ...lines] = text.split('\r\n');
  const match = /^HTTP\/1\.[01] (\d{3})(?: (.*))?$/.exec(statusLine);
  if (!match) return undefined;
  const headers = new Map<string, string>();
  for (const line of lines) {
    const colon = line.indexOf(':');
    if (colon > 0) headers.set(line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim());
  }
  return { status: Number(match[1]), reason: match[2] ?? '', headers };
}

/** The error docker-modem throws for an HTTP error status: `statusCode`, and the engine's JSON (or text) as `json`. */
function httpError(status: number, reason: string, headers: Map<string, string>, body: Buffer): Error {
  const text = body.toString('utf8');
  let json: unknown = text;
  if (/json/i.test(headers.get('content-type') ?? '')) {
    try {
      json = JSON.parse(text) as unknown;
    } catch {
      // Keep the text.
    }
  }
  const message = json && typeof json === 'object' && 'message' in json && typeof json.message === 'string' ? json.message : text.trim();
  return Object.assign(new Error(`(HTTP code ${status}) ${reason.toLowerCase()} - ${message}`), { statusCode: status, json });
}

function ignore(): void {}
