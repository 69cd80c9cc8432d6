// Tokens and the checks every route makes: go-vela/server's bearer parsing
// (router/middleware/claims/claims.go Establish), token minting (internal/token/mint.go) and the
// permission middleware the worker meets (router/middleware/perm/perm.go).

import type { IncomingMessage } from 'node:http';
import { type Caller, HttpError } from './http.ts';
import { type TokenType, mintJwt, verifyJwt } from './jwt.ts';
import type { VelaBuild } from './types.ts';

/** Unix seconds now. */
export const now = (): number => Math.floor(Date.now() / 1000);

/** Mints the sim's HS256 tokens and turns a request's bearer into a {@link Caller}. */
export class Tokens {
  readonly #key: string;
  readonly #secret: string;

  /** `key`: the HMAC key; `secret`: the shared secret ('' when none is configured). */
  constructor(key: string, secret: string) {
    this.#key = key;
    this.#secret = secret;
  }

  /** Mints a token as the server would. */
  mint(type: TokenType, sub: string, ttlSec: number, extra: { build_id?: number; repo?: string } = {}): string {
    const iat = now();
    return mintJwt(this.#key, { sub, token_type: type, iat, exp: iat + ttlSec, ...extra });
  }

  /** The token the server sends to a worker's API (`sub: vela-server`, 1 min). */
  serverToWorker(): string {
    return this.mint('WorkerAuth', 'vela-server', 60);
  }

  /** The caller of a request: the shared secret maps to a ServerWorker claim (claims.go Establish); else a verified JWT, or a 401. */
  authenticate(req: IncomingMessage): Caller {
    const header = req.headers.authorization ?? '';
    if (!header.startsWith('Bearer ')) throw new HttpError(401, 'unable to parse token: no bearer token in request');
    const token = header.slice('Bearer '.length).trim();
    if (this.#secret !== '' && token === this.#secret) {
      return { claims: { sub: 'vela-worker', token_type: 'ServerWorker', iat: 0, exp: 0 }, viaSecret: true };
    }
    const result = verifyJwt(this.#key, token);
    if (!result.ok) throw new HttpError(401, `unable to parse token: ${result.reason}`);
    return { claims: result.claims, viaSecret: false };
  }
}

/** A 401 unless the caller's token is one of `types`. */
export function requireType(caller: Caller, types: TokenType[]): void {
  if (!types.includes(caller.claims.token_type)) {
    throw new HttpError(401, `invalid token type: ${caller.claims.token_type} (want ${types.join(' or ')})`);
  }
}

/**
 * Build-scoped access: a build token for this very build. Server router/middleware/perm/perm.go
 * MustBuildAccess lets only a WorkerBuild token with a matching build_id (or a platform admin,
 * which the sim has none of) through; the shared secret maps to a ServerWorker claim
 * (claims.go Establish) and is refused.
 */
export function requireBuildAccess(caller: Caller, build: VelaBuild): void {
  if (caller.claims.token_type !== 'WorkerBuild' || caller.claims.build_id !== build.id) {
    throw new HttpError(401, 'invalid token: must provide matching worker build token');
  }
}
