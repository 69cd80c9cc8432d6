// HS256 JWTs as go-vela/server mints them (internal/token/mint.go): claims sub, exp, iat,
// token_type, plus build_id and repo for build tokens. Signed with node:crypto HMAC.

import { createHmac, timingSafeEqual } from 'node:crypto';

/** The token types of go-vela/server (constants/token.go) the worker meets. */
export type TokenType = 'WorkerAuth' | 'WorkerRegister' | 'WorkerBuild' | 'ServerWorker' | 'IDRequest';

/** The claims of a server-minted token. Times are unix seconds. */
export interface TokenClaims {
  sub: string;
  token_type: TokenType;
  iat: number;
  exp: number;
  build_id?: number;
  repo?: string;
}

function b64url(data: Buffer | string): string {
  return Buffer.from(data).toString('base64url');
}

/** Mints an HS256 JWT over `claims` with `key`. */
export function mintJwt(key: string, claims: TokenClaims): string {
  const head = b64url(JSON.stringify({ alg: 'HS256', typ: 'JWT' }));
  const body = b64url(JSON.stringify(claims));
  const sig = createHmac('sha256', key).update(`${head}.${body}`).digest('base64url');
  return `${head}.${body}.${sig}`;
}

/** The outcome of verifying a bearer token. */
export type VerifyResult = { ok: true; claims: TokenClaims } | { ok: false; reason: string };

/** Verifies an HS256 JWT's signature and expiry (like golang-jwt's Parse with the server key). */
export function verifyJwt(key: string, token: string, nowSec = Math.floor(Date.now() / 1000)): VerifyResult {
  const parts = token.split('.');
  if (parts.length !== 3) return { ok: false, reason: 'token contains an invalid number of segments' };
  const [head, body, sig] = parts as [string, string, string];
  let header: unknown;
  let claims: unknown;
  try {
    header = JSON.parse(Buffer.from(head, 'base64url').toString('utf8'));
    claims = JSON.parse(Buffer.from(body, 'base64url').toString('utf8'));
  } catch {
    return { ok: false, reason: 'token is malformed' };
  }
  if (typeof header !== 'object' || header === null || (header as { alg?: unknown }).alg !== 'HS256') {
    return { ok: false, reason: 'token signature is invalid: signing method not HS256' };
  }
  const want = createHmac('sha256', key).update(`${head}.${body}`).digest();
  const got = Buffer.from(sig, 'base64url');
  if (got.length !== want.length || !timingSafeEqual(got, want)) return { ok: false, reason: 'token signature is invalid' };
  const c = claims as Partial<TokenClaims>;
  if (typeof c.exp === 'number' && c.exp < nowSec) return { ok: false, reason: 'token has invalid claims: token is expired' };
  if (typeof c.sub !== 'string' || typeof c.token_type !== 'string') return { ok: false, reason: 'token has invalid claims' };
  return { ok: true, claims: c as TokenClaims };
}
