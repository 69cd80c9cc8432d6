import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { afterEach, describe, expect, it } from 'vitest';
import { background, withCancel } from '@berth/context';
import { listenerCount } from '@berth/context/testing';
import { connect } from '../src/connection.ts';
import { getEngineStream } from '../src/engine-stream.ts';
import { toRuntimeError } from '../src/errors.ts';

/**
 * The wire forms getEngineStream must take, written byte for byte by a TCP server: what dockerd's
 * Go server answers to an HTTP/1.0 GET (golang/go src/net/http/server.go chunkWriter.writeHeader:
 * "HTTP version < 1.1: cannot do chunked transfer encoding …, signal EOF by closing connection",
 * so a close-delimited body; an error with its Content-Length), and what a proxy in front of it
 * might send (a chunked body, or a 505 to HTTP/1.0). The real engine is read in docker.test.ts,
 * conformance.test.ts and engine-loss.test.ts, which all stream logs through it.
 */
const servers: net.Server[] = [];
const accepted = new Set<net.Socket>();
afterEach(async () => {
  for (const socket of accepted) socket.destroy();
  accepted.clear();
  await Promise.all(servers.splice(0).map((server) => new Promise((resolve) => server.close(resolve))));
});

/** A server that records each request's head and answers with `answer(socket)`. */
async function server(answer: (socket: net.Socket) => void): Promise<{ dial: () => net.Socket; requests: string[] }> {
  const requests: string[] = [];
  const srv = net.createServer((socket) => {
    accepted.add(socket);
    let head = '';
    socket.on('data', (chunk: Buffer) => {
      head += chunk.toString('latin1');
      if (head.includes('\r\n\r\n')) {
        requests.push(head);
        answer(socket);
      }
    });
    socket.on('error', () => undefined);
  });
  servers.push(srv);
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
  const { port } = srv.address() as net.AddressInfo;
  return { dial: () => net.connect({ host: '127.0.0.1', port }), requests };
}

async function text(stream: NodeJS.ReadableStream): Promise<string> {
  let out = '';
  for await (const chunk of stream) out += (chunk as Buffer).toString('latin1');
  return out;
}

const HEAD = 'HTTP/1.0 200 OK\r\nApi-Version: 1.41\r\nContent-Type: application/vnd.docker.multiplexed-stream\r\n\r\n';

describe('getEngineStream', () => {
  it('sends an HTTP/1.0 GET and gives the close-delimited body, bytes that came with the head included', async () => {
    const engine = await server((socket) => {
      socket.write(`${HEAD}first `);
      setTimeout(() => socket.end('second'), 20);
    });
    const stream = await getEngineStream(engine.dial, 'docker', '/containers/c1/logs?follow=true', background().signal);
    expect(stream).toBeDefined();
    expect(await text(stream!)).toBe('first second');
    expect(engine.requests[0]).toMatch(/^GET \/containers\/c1\/logs\?follow=true HTTP\/1\.0\r\nHost: docker\r\n/);
  });

  it("rejects an error status as docker-modem does, so the runtime's mapping reads the engine's message", async () => {
    const body = '{"message":"No such container: c1"}';
    const engine = await server((socket) =>
      socket.end(`HTTP/1.0 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`),
    );
    const error = await getEngineStream(engine.dial, 'docker', '/containers/c1/logs', background().signal).catch((e: unknown) => e);
    expect(error).toMatchObject({ statusCode: 404, json: { message: 'No such container: c1' } });
    const mapped = toRuntimeError(error, background(), { operation: 'tailContainer' }, { endpoint: 'e', source: 's' });
    expect(mapped).toMatchObject({ code: 'NotFound' });
    expect(mapped.message).toContain('the Docker engine answered 404: No such container: c1');
  });

  it('resolves undefined for a chunked answer or a refusal of HTTP/1.0 (a proxy may send either), so the caller reads it through dockerode', async () => {
    const engine = await server((socket) => socket.end('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n'));
    expect(await getEngineStream(engine.dial, 'docker', '/x', background().signal)).toBeUndefined();
    const strict = await server((socket) => socket.end('HTTP/1.1 505 HTTP Version Not Supported\r\nContent-Length: 0\r\n\r\n'));
    expect(await getEngineStream(strict.dial, 'docker', '/x', background().signal)).toBeUndefined();
  });

  it('rejects ECONNRESET when the connection closes before an answer, and on an answer that is not HTTP', async () => {
    const closing = await server((socket) => socket.destroy());
    await expect(getEngineStream(closing.dial, 'docker', '/x', background().signal)).rejects.toMatchObject({ code: 'ECONNRESET' });
    const garbage = await server((socket) => socket.end('SSH-2.0-OpenSSH\r\n\r\n'));
    await expect(getEngineStream(garbage.dial, 'docker', '/x', background().signal)).rejects.toThrow(/is not HTTP/);
  });

  it("rejects with the socket's error code when nothing listens", async () => {
    const srv = net.createServer();
    await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
    const { port } = srv.address() as net.AddressInfo;
    await new Promise((resolve) => srv.close(resolve));
    await expect(getEngineStream(() => net.connect({ host: '127.0.0.1', port }), 'docker', '/x', background().signal)).rejects.toMatchObject({
      code: 'ECONNREFUSED',
    });
  });

  it('aborts a request whose answer has not come, closing its socket and leaving no listener on the signal', async () => {
    const sockets: net.Socket[] = [];
    const silent = await server(() => undefined);
    const [ctx, cancel] = withCancel(background());
    const pending = getEngineStream(
      () => {
        const socket = silent.dial();
        sockets.push(socket);
        return socket;
      },
      'docker',
      '/x',
      ctx.signal,
    );
    await new Promise((resolve) => setTimeout(resolve, 50));
    cancel();
    await expect(pending).rejects.toMatchObject({ name: 'AbortError' });
    expect(sockets[0]?.destroyed).toBe(true);
    await expect(getEngineStream(silent.dial, 'docker', '/x', ctx.signal)).rejects.toMatchObject({ name: 'AbortError' });
  });

  it('removes its abort listener once the answer has come', async () => {
    const engine = await server((socket) => socket.end(`${HEAD}x`));
    const ctx = background();
    const [requestCtx] = withCancel(ctx);
    const stream = await getEngineStream(engine.dial, 'docker', '/x', requestCtx.signal);
    expect(listenerCount(requestCtx.signal)).toBe(0);
    expect(await text(stream!)).toBe('x');
  });
});

describe("connect()'s dial", () => {
  it('reaches a TCP engine and a TLS one (verified with the given CA), and close() ends a stream still open', async () => {
    const plain = await server((socket) => socket.write(`${HEAD}over tcp`));
    const { port } = servers[0]!.address() as net.AddressInfo;
    const tcp = connect({ host: `tcp://127.0.0.1:${port}` });
    const stream = await getEngineStream(tcp.dial, tcp.host, '/x', background().signal);
    const closed = new Promise((resolve) => stream!.once('close', resolve));
    let received = '';
    stream!.on('data', (chunk: Buffer) => (received += chunk.toString())).resume();
    await expect.poll(() => received).toBe('over tcp');
    expect(plain.requests[0]).toContain(`Host: 127.0.0.1:${port}\r\n`);
    tcp.close();
    await closed;

    const dir = mkdtempSync(path.join(os.tmpdir(), 'berth-tls-'));
    try {
      const [key, cert] = [path.join(dir, 'key.pem'), path.join(dir, 'cert.pem')];
      execFileSync(
        'openssl',
        ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', key, '-out', cert, '-days', '1', '-subj', '/CN=engine'].concat([
          '-addext',
          'subjectAltName=IP:127.0.0.1',
        ]),
        { stdio: 'ignore' },
      );
      const srv = tls.createServer({ key: readFileSync(key), cert: readFileSync(cert) }, (socket) => socket.end(`${HEAD}over tls`));
      srv.on('connection', (socket: net.Socket) => accepted.add(socket));
      servers.push(srv);
      await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
      const tlsPort = (srv.address() as net.AddressInfo).port;
      const secure = connect({ host: `https://127.0.0.1:${tlsPort}`, tls: { ca: readFileSync(cert) } });
      expect(await text((await getEngineStream(secure.dial, secure.host, '/x', background().signal))!)).toBe('over tls');
      secure.close();
      const untrusted = connect({ host: `https://127.0.0.1:${tlsPort}`, tls: {} });
      await expect(getEngineStream(untrusted.dial, untrusted.host, '/x', background().signal)).rejects.toMatchObject({ code: 'DEPTH_ZERO_SELF_SIGNED_CERT' });
      untrusted.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
