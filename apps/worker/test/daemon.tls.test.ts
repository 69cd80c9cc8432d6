// Issue #15 item 2: with an https worker address the API serves TLS with server.cert /
// server.cert-key and server.tls-min-version (go-vela/worker cmd/vela-worker/server.go, which
// ListenAndServeTLS with tls.Config MinVersion). The certificate is made by openssl here.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { request } from 'node:https';
import path from 'node:path';
import { VelaSim } from '@berth/vela-sim';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type WorkerHandle, startWorker, uniqueRoute, waitFor } from './daemon-harness.ts';
import { tempDir } from './temp-dir.ts';

let sim: VelaSim;
const dir = tempDir('berth-tls-');
const certFile = path.join(dir, 'cert.pem');
const keyFile = path.join(dir, 'key.pem');
let cert: Buffer;

beforeAll(async () => {
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-days',
      '1',
      '-subj',
      '/CN=127.0.0.1',
      '-addext',
      'subjectAltName=IP:127.0.0.1',
      '-keyout',
      keyFile,
      '-out',
      certFile,
    ],
    { stdio: 'ignore' },
  );
  cert = readFileSync(certFile);
  sim = await VelaSim.start();
});

afterAll(async () => {
  await sim?.close();
});

/** GET over TLS trusting only the test certificate; resolves the status and body, or rejects. */
function get(url: string, tls: { maxVersion?: 'TLSv1.2' | 'TLSv1.3'; headers?: Record<string, string> } = {}): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { ca: cert, ...(tls.maxVersion ? { maxVersion: tls.maxVersion } : {}), headers: tls.headers ?? {} }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString('utf8')));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

describe('the worker API over TLS', { timeout: 60_000 }, () => {
  let worker: WorkerHandle;
  afterAll(async () => {
    await worker?.stop();
  });

  it('serves https with the configured certificate; plain http gets no API; the executors route works for the server', async () => {
    worker = await startWorker(sim, {
      route: uniqueRoute('tls'),
      env: { VELA_WORKER_ADDR: 'https://w-tls:8443', VELA_SERVER_CERT: certFile, VELA_SERVER_CERT_KEY: keyFile, VELA_SERVER_TLS_MIN_VERSION: '1.3' },
    });
    expect(worker.daemon.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    expect(await get(`${worker.daemon.url}/health`)).toEqual({ status: 200, body: '"ok"' });
    await waitFor('the worker to register', () => worker.daemon.registered);
    const executors = await get(`${worker.daemon.url}/api/v1/executors`, { headers: { authorization: `Bearer ${sim.serverToWorkerToken()}` } });
    expect(executors).toEqual({ status: 200, body: '[]' });
    // Minimum version 1.3: a TLS 1.2 client is refused.
    await expect(get(`${worker.daemon.url}/health`, { maxVersion: 'TLSv1.2' })).rejects.toThrow(/protocol|version|alert/i);
    // Plain HTTP on the TLS port is not the API.
    const plain = await fetch(worker.daemon.url.replace('https:', 'http:') + '/health').then(
      (r) => r.status,
      (e: unknown) => (e instanceof Error ? e.message : String(e)),
    );
    expect(plain).not.toBe(200);
  });

  it('refuses to start with a certificate path that does not exist, saying which file and which setting', async () => {
    await expect(
      startWorker(sim, {
        route: uniqueRoute('tls'),
        env: { VELA_WORKER_ADDR: 'https://w-tls2:8443', VELA_SERVER_CERT: path.join(dir, 'missing.pem'), VELA_SERVER_CERT_KEY: keyFile },
      }),
    ).rejects.toThrow(/expecting certificate file at .*missing\.pem.*server\.cert/);
  });
});
