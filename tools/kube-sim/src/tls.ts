// A throw-away certificate authority and server certificate, made with the `openssl` CLI at
// start, and the kubeconfig that trusts them.

import { execFile } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { stringify } from 'yaml';

const run = promisify(execFile);

/** PEM material for the HTTPS server and its clients. */
export interface TlsMaterial {
  caCert: string;
  cert: string;
  key: string;
}

/** Generates an EC P-256 CA and a server certificate for 127.0.0.1 and localhost in `dir`. */
export async function generateTls(dir: string): Promise<TlsMaterial> {
  const p = (name: string) => path.join(dir, name);
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  try {
    await run('openssl', [
      'req',
      '-x509',
      ...ec,
      '-keyout',
      p('ca.key'),
      '-out',
      p('ca.crt'),
      '-days',
      '3',
      '-subj',
      '/CN=kube-sim-ca',
      '-addext',
      'basicConstraints=critical,CA:TRUE',
      '-addext',
      'keyUsage=critical,keyCertSign,cRLSign,digitalSignature',
    ]);
    await run('openssl', ['req', ...ec, '-keyout', p('server.key'), '-out', p('server.csr'), '-subj', '/CN=kube-sim']);
    await writeFile(
      p('server.ext'),
      [
        'basicConstraints=CA:FALSE',
        'keyUsage=critical,digitalSignature,keyEncipherment',
        'extendedKeyUsage=serverAuth',
        'subjectAltName=IP:127.0.0.1,DNS:localhost',
        '',
      ].join('\n'),
    );
    await run('openssl', [
      'x509',
      '-req',
      '-in',
      p('server.csr'),
      '-CA',
      p('ca.crt'),
      '-CAkey',
      p('ca.key'),
      '-CAcreateserial',
      '-out',
      p('server.crt'),
      '-days',
      '2',
      '-extfile',
      p('server.ext'),
    ]);
  } catch (err) {
    throw new Error(`[kube-sim] could not generate TLS certificates with openssl: ${(err as Error).message}`, { cause: err });
  }
  const [caCert, cert, key] = await Promise.all([readFile(p('ca.crt'), 'utf8'), readFile(p('server.crt'), 'utf8'), readFile(p('server.key'), 'utf8')]);
  return { caCert, cert, key };
}

/** A kubeconfig (YAML) for one cluster, user and context, all named `name`. */
export function renderKubeconfig(options: { name: string; server: string; caCert: string; token: string; namespace?: string }): string {
  const { name } = options;
  return stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name, cluster: { server: options.server, 'certificate-authority-data': Buffer.from(options.caCert).toString('base64') } }],
    users: [{ name, user: { token: options.token } }],
    contexts: [{ name, context: { cluster: name, user: name, namespace: options.namespace ?? 'default' } }],
    'current-context': name,
    preferences: {},
  });
}
