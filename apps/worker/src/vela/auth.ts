/**
 * The worker's credentials with a Vela server: the shared secret or a registration token posted
 * to `/register`, the worker-auth token refreshed at every check-in, and expiry as the SDK sees it.
 *
 * Tokens are HS256 JWTs signed with the server's private key, which the worker does not have: it
 * can decode them but never verify their signature. "Verifying" a registration token here means
 * checking what can be checked without the key: it is a JWT, `sub` is this worker's hostname,
 * `token_type` (when present) is `WorkerRegister`, and it has not expired. The server checks the
 * signature when the token is used.
 */
import { type Context, afterFunc, errOf } from '@berth/context';
import type { VelaClient } from './client.ts';
import type { VelaWorker } from './models.ts';

/** A token counts as expired when fewer than this many seconds remain (go-vela/sdk-go vela/jwt.go). */
const EXPIRY_MARGIN_SEC = 10;

/** The claims of a Vela token, decoded without verification. */
export interface TokenClaims {
  sub?: string;
  exp?: number;
  iat?: number;
  token_type?: string;
  build_id?: number;
  repo?: string;
  [claim: string]: unknown;
}

/** Decodes a JWT's claims **without verifying** it; undefined when `token` is not a JWT. */
export function decodeJwt(token: string): TokenClaims | undefined {
  const parts = token.split('.');
  if (parts.length !== 3 || !parts[1]) return undefined;
  try {
    const claims: unknown = JSON.parse(Buffer.from(parts[1], 'base64url').toString('utf8'));
    return typeof claims === 'object' && claims !== null && !Array.isArray(claims) ? (claims as TokenClaims) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * True when `token` is a JWT whose `exp` is less than {@link EXPIRY_MARGIN_SEC} away (or past).
 * A token that is not a JWT (the shared secret) or has no `exp` never expires.
 */
export function isTokenExpired(token: string, nowMs = Date.now()): boolean {
  const exp = decodeJwt(token)?.exp;
  if (typeof exp !== 'number') return false;
  return exp - nowMs / 1000 < EXPIRY_MARGIN_SEC;
}

/**
 * How long to wait before the next check-in: `checkInMs`, or less when the current token would
 * expire first (a minute before its expiry, at least 1 s). Vela only warns that the check-in
 * period must be shorter than the token lifetime; Berth checks in early instead.
 */
export function nextCheckInDelayMs(token: string, checkInMs: number, nowMs = Date.now()): number {
  const exp = decodeJwt(token)?.exp;
  if (typeof exp !== 'number') return checkInMs;
  return Math.max(1_000, Math.min(checkInMs, exp * 1000 - nowMs - 60_000));
}

/** The answer the worker's `POST /register` gives (body is JSON). */
export interface RegisterResponse {
  status: 200 | 401;
  body: unknown;
}

/** The outcome of checking a registration token. */
export type RegistrationCheck = { ok: true; token: string; claims: TokenClaims } | { ok: false; response: RegisterResponse; reason: string };

/**
 * Checks the `Authorization` header of a `POST /register` as far as a worker can (see the module
 * doc): Bearer JWT, `sub` = `hostname`, `token_type` `WorkerRegister` when present, not expired.
 * The 401 bodies are Vela's: `{}` for a missing or unreadable token, `"worker hostname is invalid"`.
 */
export function checkRegistrationToken(authorization: string | undefined, hostname: string, nowMs = Date.now()): RegistrationCheck {
  const denied = (reason: string, body: unknown = {}): RegistrationCheck => ({ ok: false, reason, response: { status: 401, body } });
  if (!authorization?.startsWith('Bearer ')) return denied('no bearer token');
  const token = authorization.slice('Bearer '.length).trim();
  const claims = decodeJwt(token);
  if (!claims) return denied('the token is not a JWT');
  if (typeof claims.sub !== 'string' || claims.sub === '') return denied('the token has no subject');
  if (claims.sub !== hostname) return denied(`the token is for ${claims.sub}, not ${hostname}`, 'worker hostname is invalid');
  if (claims.token_type !== undefined && claims.token_type !== 'WorkerRegister') {
    return denied(`the token is a ${String(claims.token_type)} token, not a registration token`, 'token is not a registration token');
  }
  if (isTokenExpired(token, nowMs)) return denied('the registration token has expired', 'registration token is expired');
  return { ok: true, token, claims };
}

/** Options of {@link WorkerCredentials}. */
export interface WorkerCredentialsOptions {
  /** The worker's hostname (the host of its address): registration tokens must be for it. */
  hostname: string;
  /** The shared secret (VELA_SERVER_SECRET); empty or absent: register with a token. */
  secret?: string | undefined;
}

/**
 * The token the worker talks to the server with, and where a new one comes from: the secret when
 * configured, otherwise a registration token posted to `/register` (one slot: a second post while
 * one is waiting is answered "worker already registered"), then the auth tokens each check-in
 * returns.
 */
export class WorkerCredentials {
  readonly hostname: string;
  readonly secret: string | undefined;
  #token: string | undefined;
  #waiting: string | undefined;
  readonly #waiters = new Set<(token: string) => void>();

  constructor(options: WorkerCredentialsOptions) {
    this.hostname = options.hostname;
    this.secret = options.secret === '' ? undefined : options.secret;
    this.#token = this.secret;
  }

  /** The current token (undefined before the first registration). */
  get token(): string | undefined {
    return this.#token;
  }

  /** True when a new registration token is needed: none yet, or expired without a secret to fall back on. */
  needsRegistration(nowMs = Date.now()): boolean {
    if (this.#token === undefined) return true;
    return this.secret === undefined && isTokenExpired(this.#token, nowMs);
  }

  /** Replaces the current token (after a successful check-in). */
  setToken(token: string): void {
    this.#token = token;
  }

  /** Handles `POST /register`: checks the token and, when good, hands it to whoever waits for one. */
  offerRegistration(authorization: string | undefined, nowMs = Date.now()): RegisterResponse {
    const check = checkRegistrationToken(authorization, this.hostname, nowMs);
    if (!check.ok) return check.response;
    if (this.#waiting !== undefined) return { status: 200, body: 'worker already registered' };
    const waiter = this.#waiters.values().next();
    if (!waiter.done) {
      this.#waiters.delete(waiter.value);
      waiter.value(check.token);
    } else {
      this.#waiting = check.token;
    }
    return { status: 200, body: 'successfully passed token to worker' };
  }

  /**
   * A token to register with: the current one while it is good (or the secret), otherwise the next
   * registration token posted to `/register`. Rejects with the ctx's error when it ends first.
   */
  async registrationToken(ctx: Context): Promise<string> {
    if (!this.needsRegistration()) return this.#token!;
    if (this.#waiting !== undefined) {
      const t = this.#waiting;
      this.#waiting = undefined;
      this.#token = t;
      return t;
    }
    if (ctx.signal.aborted) throw errOf(ctx);
    const token = await new Promise<string>((resolve, reject) => {
      const waiter = (t: string): void => {
        stop();
        resolve(t);
      };
      const stop = afterFunc(ctx, () => {
        this.#waiters.delete(waiter);
        reject(errOf(ctx));
      });
      this.#waiters.add(waiter);
    });
    this.#token = token;
    return token;
  }
}

/** What a check-in did. */
export interface CheckInResult {
  /** The token to use from now on (a fresh auth token, or the secret). */
  token: string;
  /** The worker record the server stored. */
  worker: VelaWorker;
  /** True when the worker was created (first registration), false when refreshed. */
  registered: boolean;
}

/**
 * One check-in, as go-vela/worker does it: `GET /api/v1/workers/{host}`; on 404
 * `POST /api/v1/workers` (register), otherwise `POST …/refresh`; then `PUT` the worker record
 * (with the token used so far). `client` carries the current token. Rejects with the client's
 * error when a call fails after its retries.
 */
export async function checkIn(ctx: Context, client: VelaClient, record: VelaWorker & { hostname: string }): Promise<CheckInResult> {
  const existing = await client.getWorker(ctx, record.hostname);
  const now = Math.floor(Date.now() / 1000);
  let token: string;
  if (existing === undefined) {
    token = await client.createWorker(ctx, { ...record, last_checked_in: now });
  } else {
    token = await client.refreshWorker(ctx, record.hostname);
  }
  const worker = await client.updateWorker(ctx, record.hostname, { ...record, last_status_update_at: now });
  return { token, worker, registered: existing === undefined };
}
