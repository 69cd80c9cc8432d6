// The sim's settings and what its route modules share.

import type { Tokens } from './auth.ts';
import type { QueueKeys } from './signing.ts';
import type { SimState } from './state.ts';
import type { VelaBuild } from './types.ts';

/** Options of `VelaSim.start`. */
export interface VelaSimOptions {
  /** The shared secret (server VELA_SECRET = worker VELA_SERVER_SECRET). Default: random. Empty string: none configured. */
  secret?: string;
  /** HMAC key for minted JWTs (server VELA_SERVER_PRIVATE_KEY). Default: random. */
  tokenKey?: string;
  /** Queue private key in Vela's base64 64-byte form. Default: a fresh key pair. */
  queuePrivateKey?: string;
  /** Redis URL for pushes and `queue_address`. Default REDIS_URL or redis://127.0.0.1:6379. */
  queueAddr?: string;
  /** Lifetime of worker auth tokens in seconds (server default 20 min). */
  workerAuthTokenTtlSec?: number;
  /** Lifetime of registration tokens in seconds (server default 1 min). */
  registerTokenTtlSec?: number;
  /** Added to the repo timeout for build tokens, seconds (server default 5 min). */
  buildTokenBufferSec?: number;
  /** Port to listen on (default 0: any free port). Always 127.0.0.1. */
  port?: number;
  /** Lifetime of SCM install tokens in seconds (a GitHub App installation token lives 1 h). */
  installTokenTtlSec?: number;
}

/** What the route modules share: the records, the token issuer and the sim's settings. */
export interface SimContext {
  readonly state: SimState;
  readonly tokens: Tokens;
  readonly options: VelaSimOptions;
  /** The shared secret ('' when none is configured). */
  readonly secret: string;
  readonly queueKeys: QueueKeys;
  readonly queueAddr: string;
}

/** Route prefix of one build. */
export const BUILD = '/api/v1/repos/:org/:repo/builds/:build';

/** Lifetime of a build-scoped token: the repo timeout plus the server's buffer (default 5 min). */
export function buildTokenTtl(ctx: SimContext, build: VelaBuild): number {
  return (build.repo?.timeout ?? 30) * 60 + (ctx.options.buildTokenBufferSec ?? 300);
}
