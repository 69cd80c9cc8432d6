// Raw HTTPS calls to a kube-sim, for wire-level assertions.

import { request } from 'node:https';
import { type KubeSim } from '../src/index.ts';

/** A parsed response. */
export interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  body: any;
}

/** One request; the body is JSON-encoded unless it is a string. */
export function call(
  sim: KubeSim,
  method: string,
  path: string,
  opts: { body?: unknown; contentType?: string; token?: string | null; accept?: string } = {},
): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const payload = opts.body === undefined ? undefined : typeof opts.body === 'string' ? opts.body : JSON.stringify(opts.body);
    const headers: Record<string, string> = {};
    if (opts.token !== null) headers.authorization = `Bearer ${opts.token ?? sim.token}`;
    if (payload !== undefined) {
      headers['content-type'] = opts.contentType ?? 'application/json';
      headers['content-length'] = String(Buffer.byteLength(payload));
    }
    if (opts.accept) headers.accept = opts.accept;
    const req = request(`${sim.url}${path}`, { method, ca: sim.caCert, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', reject);
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let body: unknown;
        try {
          body = JSON.parse(text);
        } catch {
          body = undefined;
        }
        resolve({ status: res.statusCode ?? 0, headers: res.headers, text, body });
      });
    });
    req.on('error', reject);
    req.end(payload);
  });
}

/** A watch stream read line by line. */
export interface WatchStream {
  status: Promise<number>;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  events: any[];
  /** Resolves when the server ends the stream. */
  ended: Promise<void>;
  close(): void;
}

/** Opens a watch (or any streaming GET) and collects newline-delimited JSON. */
export function openWatch(sim: KubeSim, path: string): WatchStream {
  const events: unknown[] = [];
  let resolveStatus: (n: number) => void = () => undefined;
  let resolveEnded: () => void = () => undefined;
  const status = new Promise<number>((r) => (resolveStatus = r));
  const ended = new Promise<void>((r) => (resolveEnded = r));
  const req = request(`${sim.url}${path}`, { ca: sim.caCert, headers: { authorization: `Bearer ${sim.token}` } }, (res) => {
    resolveStatus(res.statusCode ?? 0);
    let buffer = '';
    res.setEncoding('utf8');
    res.on('data', (chunk: string) => {
      buffer += chunk;
      let i: number;
      while ((i = buffer.indexOf('\n')) >= 0) {
        const line = buffer.slice(0, i);
        buffer = buffer.slice(i + 1);
        if (line.trim()) events.push(JSON.parse(line));
      }
    });
    res.on('end', () => resolveEnded());
    res.on('error', () => resolveEnded());
    res.on('close', () => resolveEnded());
  });
  req.on('error', () => {
    resolveStatus(0);
    resolveEnded();
  });
  req.end();
  return { status, events, ended, close: () => req.destroy() };
}

/** A text stream (pods/log). */
export interface TextStream {
  status: Promise<number>;
  text: () => string;
  /** Resolves true when the server ended the response cleanly, false when it was cut. */
  ended: Promise<boolean>;
  close(): void;
}

/** Opens a streaming GET and collects its text. */
export function openText(sim: KubeSim, path: string): TextStream {
  let text = '';
  let resolveStatus: (n: number) => void = () => undefined;
  let resolveEnded: (clean: boolean) => void = () => undefined;
  const status = new Promise<number>((r) => (resolveStatus = r));
  const ended = new Promise<boolean>((r) => (resolveEnded = r));
  const req = request(`${sim.url}${path}`, { ca: sim.caCert, headers: { authorization: `Bearer ${sim.token}` } }, (res) => {
    resolveStatus(res.statusCode ?? 0);
    res.setEncoding('utf8');
    res.on('data', (chunk: string) => (text += chunk));
    res.on('end', () => resolveEnded(true));
    res.on('error', () => resolveEnded(false));
    res.on('aborted', () => resolveEnded(false));
    res.on('close', () => resolveEnded(res.complete));
  });
  req.on('error', () => {
    resolveStatus(0);
    resolveEnded(false);
  });
  req.end();
  return { status, text: () => text, ended, close: () => req.destroy() };
}
