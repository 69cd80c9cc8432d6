import { spawn } from 'node:child_process';
import https from 'node:https';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import type { KubeSim } from '@berth/kube-sim';
import { main } from '../src/main.ts';
import type { Io } from '../src/io.ts';

/** What one in-process run of `berth` printed and returned. */
export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `berth <args>` in this process, capturing its output. */
export async function runCli(args: string[], options: { cwd?: string; env?: NodeJS.ProcessEnv } = {}): Promise<CliRun> {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  stdout.on('data', (b: Buffer) => out.push(b));
  stderr.on('data', (b: Buffer) => err.push(b));
  const io: Io = { stdout, stderr, env: options.env ?? {}, cwd: options.cwd ?? process.cwd(), exitCode: 0 };
  const code = await main(['node', 'berth', ...args], io);
  return { code, stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8') };
}

/** The `berth` executable, run as its own process by the end-to-end tests. */
const BERTH = path.join(import.meta.dirname, '../bin/berth.js');

/** What one `berth` process printed and how it exited; `ms` is its wall time. */
export interface ProcessRun {
  code: number | null;
  stdout: string;
  stderr: string;
  ms: number;
}

/** Runs the real `berth <args>` process in `cwd` (NO_COLOR, the test's environment plus `env`). */
export function spawnBerth(args: string[], cwd: string, env: NodeJS.ProcessEnv = {}): Promise<ProcessRun> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BERTH, ...args], { cwd, env: { ...process.env, NO_COLOR: '1', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (b: Buffer) => (stdout += b.toString()));
    child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr, ms: performance.now() - started }));
  });
}

/** The pods `kube` holds now, asked over its HTTPS API with its own CA and token (an outside observer). */
export function kubeSimPodNames(kube: KubeSim): Promise<string[]> {
  return new Promise((resolve, reject) => {
    const request = https.get(
      `${kube.url}/api/v1/namespaces/default/pods`,
      { ca: kube.caCert, headers: { authorization: `Bearer ${kube.token}` } },
      (response) => {
        let body = '';
        response.on('data', (b: Buffer) => (body += b.toString()));
        response.on('end', () => resolve((JSON.parse(body) as { items: { metadata: { name: string } }[] }).items.map((p) => p.metadata.name)));
        response.on('error', reject);
      },
    );
    request.on('error', reject);
  });
}
