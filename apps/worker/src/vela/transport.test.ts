// The Vela client's default transport (node:http), against a real HTTP server.
import { execFile } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import { type AddressInfo, createServer as createNetServer } from 'node:net';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { httpTransport } from './transport.ts';

const run = promisify(execFile);
let server: Server;
let url: string;
const requests: Array<{ method: string; headers: Record<string, unknown>; body: string }> = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      requests.push({ method: req.method ?? '', headers: req.headers, body });
      if (req.url === '/slow') return; // never answers
      if (req.url === '/big') {
        // Chunked, in pieces: the body is read whole.
        for (let i = 0; i < 100; i++) res.write(`${'x'.repeat(1023)}\n`);
        res.end('{"end":"é"}');
        return;
      }
      res.writeHead(req.url === '/missing' ? 404 : 200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ echo: body }));
    });
  });
  // Connections are kept 30 s: a process held by one would exit only then.
  server.keepAliveTimeout = 30_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

describe('httpTransport', () => {
  it('sends method, headers and body, and answers with status, ok and the whole body', async () => {
    const res = await httpTransport(`${url}/x`, {
      method: 'PUT',
      headers: { authorization: 'Bearer t' },
      body: '{"a":1}',
      signal: new AbortController().signal,
    });
    expect(res).toMatchObject({ status: 200, ok: true });
    expect(JSON.parse(await res.text())).toEqual({ echo: '{"a":1}' });
    expect(requests.at(-1)).toMatchObject({ method: 'PUT', headers: { authorization: 'Bearer t', 'content-length': '7' } });
    const missing = await httpTransport(`${url}/missing`, { method: 'GET', headers: {}, signal: new AbortController().signal });
    expect(missing).toMatchObject({ status: 404, ok: false });
  });

  it('reads a long chunked answer whole, as UTF-8', async () => {
    const text = await (await httpTransport(`${url}/big`, { method: 'GET', headers: {}, signal: new AbortController().signal })).text();
    expect(text.length).toBe(100 * 1024 + '{"end":"é"}'.length);
    expect(text.endsWith('{"end":"é"}')).toBe(true);
  });

  it('rejects when the signal aborts a request that gets no answer, and at once when already aborted', async () => {
    const controller = new AbortController();
    const pending = httpTransport(`${url}/slow`, { method: 'GET', headers: {}, signal: controller.signal });
    setTimeout(() => controller.abort(new Error('timed out')), 50);
    await expect(pending).rejects.toThrow();
    await expect(httpTransport(`${url}/x`, { method: 'GET', headers: {}, signal: AbortSignal.abort(new Error('gone')) })).rejects.toThrow('gone');
  });

  it('rejects when nothing listens', async () => {
    await expect(httpTransport('http://127.0.0.1:9/x', { method: 'GET', headers: {}, signal: new AbortController().signal })).rejects.toMatchObject({
      code: 'ECONNREFUSED',
    });
  });

  it('speaks TLS to an https:// address (node:https is loaded on that first call)', async () => {
    // A TCP server that takes the first bytes and hangs up: a TLS handshake begins with a
    // handshake record (0x16), where plain HTTP would begin with the method.
    const first = new Promise<number>((resolve) => {
      const tcp = createNetServer((socket) => {
        socket.once('data', (b: Buffer) => {
          resolve(b[0] ?? -1);
          socket.destroy();
          tcp.close();
        });
      });
      tcp.listen(0, '127.0.0.1', () => {
        const port = (tcp.address() as AddressInfo).port;
        void httpTransport(`https://127.0.0.1:${port}/x`, { method: 'GET', headers: {}, signal: new AbortController().signal }).catch(() => undefined);
      });
    });
    expect(await first).toBe(0x16);
  });

  it('keeps no process alive with its kept connections: a script exits once its call is done', async () => {
    const script = `import { httpTransport } from ${JSON.stringify(new URL('./transport.ts', import.meta.url).href)};
const res = await httpTransport(${JSON.stringify(`${url}/x`)}, { method: 'GET', headers: {}, signal: new AbortController().signal });
process.stdout.write(String(res.status));`;
    const started = performance.now();
    const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script], { timeout: 60_000 });
    expect(stdout).toBe('200');
    expect(performance.now() - started).toBeLessThan(server.keepAliveTimeout / 2);
  });
});
