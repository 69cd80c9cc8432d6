// Small HTTP helpers shared by the API handlers.

import { type IncomingMessage, type ServerResponse } from 'node:http';
import { ApiError, badRequest } from '../status.ts';

/** Reads a request body (capped at 8 MiB) as a string. */
async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > 8 * 1024 * 1024)
      throw new ApiError({
        kind: 'Status',
        apiVersion: 'v1',
        metadata: {},
        status: 'Failure',
        message: 'request entity too large',
        reason: 'RequestEntityTooLarge',
        code: 413,
      });
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** Reads and parses a JSON body; an empty body gives `undefined`. */
export async function readJson(req: IncomingMessage): Promise<unknown> {
  const text = await readBody(req);
  if (text.trim() === '') return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw badRequest(`couldn't get version/kind; json parse error: ${(err as Error).message}`);
  }
}

/** Writes a JSON response. */
export function sendJson(res: ServerResponse, code: number, body: unknown, headers: Record<string, string> = {}): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const text = JSON.stringify(body);
  res.writeHead(code, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), 'cache-control': 'no-cache, private', ...headers });
  res.end(text);
}

/** Writes an ApiError (or any error, as a 500) as a Status response. */
export function sendError(res: ServerResponse, err: unknown): void {
  if (err instanceof ApiError) {
    sendJson(res, err.code, err.status, err.headers);
    return;
  }
  const message = err instanceof Error ? err.message : String(err);
  sendJson(res, 500, {
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message: `Internal error occurred: ${message}`,
    reason: 'InternalError',
    code: 500,
  });
}

/** Parses a boolean query parameter as the API server does ("true"/"1"). */
export function queryBool(value: string | null): boolean {
  return value === 'true' || value === '1';
}

/** Parses an integer query parameter; 400 when it is not one. */
export function queryInt(name: string, value: string | null): number | undefined {
  if (value === null || value === '') return undefined;
  if (!/^-?\d+$/.test(value)) throw badRequest(`${name}: invalid value "${value}": must be an integer`);
  return Number(value);
}
