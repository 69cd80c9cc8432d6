/**
 * The Vela server API client the worker uses: Bearer auth, JSON, a per-call timeout, and retries
 * with capped, jittered backoff on 5xx, network errors and timeouts.
 */
import { type Context, errOf, sleep, withTimeout } from '@berth/context';
import { httpTransport, type Transport, type TransportResponse } from './transport.ts';
import type { VelaBuild, VelaExecutable, VelaLog, VelaQueueInfo, VelaSecret, VelaService, VelaStep, VelaToken, VelaWorker } from './models.ts';

/** What failed in a call. */
export type VelaApiErrorKind =
  /** The server answered with a non-2xx status (`status` holds it). */
  | 'http'
  /** The connection failed (refused, reset, DNS). */
  | 'network'
  /** No answer within the per-call timeout. */
  | 'timeout'
  /** A 2xx answer whose body is not the JSON expected. */
  | 'bad-response';

/**
 * A failed Vela API call, after its retries. `status` is 0 unless `kind` is `http`; `message`
 * carries the server's `{"error"}` text when it sent one.
 */
export class VelaApiError extends Error {
  override readonly name = 'VelaApiError';
  readonly kind: VelaApiErrorKind;
  readonly status: number;
  readonly method: string;
  readonly path: string;
  /** The server's error text (`{"error": …}`), or the start of a non-JSON body. */
  readonly serverMessage: string | undefined;
  /** How many attempts were made. */
  readonly attempts: number;

  constructor(init: {
    kind: VelaApiErrorKind;
    status: number;
    method: string;
    path: string;
    serverMessage?: string | undefined;
    attempts: number;
    cause?: unknown;
  }) {
    const what =
      init.kind === 'http'
        ? `answered ${init.status}${init.serverMessage ? `: ${init.serverMessage}` : ''}`
        : init.kind === 'timeout'
          ? 'timed out'
          : init.kind === 'network'
            ? `failed: ${init.cause instanceof Error ? init.cause.message : String(init.cause)}`
            : `answered with an unreadable body${init.serverMessage ? `: ${init.serverMessage}` : ''}`;
    super(
      `[vela] ${init.method} ${init.path} ${what}${init.attempts > 1 ? ` (after ${init.attempts} attempts)` : ''}`,
      init.cause === undefined ? undefined : { cause: init.cause },
    );
    this.kind = init.kind;
    this.status = init.status;
    this.method = init.method;
    this.path = init.path;
    this.serverMessage = init.serverMessage;
    this.attempts = init.attempts;
  }

  /** True for failures worth retrying: 5xx, 408, 429, network errors, timeouts, unreadable 2xx bodies. */
  get retryable(): boolean {
    if (this.kind !== 'http') return true;
    return this.status >= 500 || this.status === 408 || this.status === 429;
  }
}

/** True when `e` is a {@link VelaApiError} with HTTP status `status`. */
export function isVelaStatus(e: unknown, status: number): e is VelaApiError {
  return e instanceof VelaApiError && e.kind === 'http' && e.status === status;
}

/** Retry settings; the defaults suit status updates. */
export interface RetryOptions {
  /** Attempts in all, the first included (default 5). `Infinity`: until the ctx ends. */
  attempts?: number;
  /** First backoff in ms (default 500); doubles per attempt. */
  baseDelayMs?: number;
  /** Cap of one backoff in ms (default 30 000). */
  maxDelayMs?: number;
}

/** Where the client reports retries (a pino logger fits). */
interface ClientLogger {
  warn(obj: object, msg: string): void;
}

/** Options of {@link VelaClient}. */
export interface VelaClientOptions {
  /** The server's address, e.g. `https://vela.example.com` (a trailing `/` is ignored). */
  address: string;
  /** The bearer token: the secret, a registration, worker-auth or build token. */
  token: string;
  /** Per-attempt timeout in ms (default 15 000, the SDK's). */
  timeoutMs?: number;
  /** Default retry settings for every call. */
  retry?: RetryOptions;
  /** `User-Agent` (default `berth-worker (vela-sdk-go compatible)`). */
  userAgent?: string;
  logger?: ClientLogger;
  /** How requests are sent (tests inject one; `fetch` fits). Default: {@link httpTransport}. */
  transport?: Transport;
}

/** Per-call options. */
export interface CallOptions {
  /** Overrides the client's retry settings for this call. */
  retry?: RetryOptions;
  /** Stops retrying when this returns false for an error that would be retried. */
  shouldRetry?: (e: VelaApiError) => boolean;
  /** Extra request headers (the install-token refresh sends `Token`). */
  headers?: Record<string, string>;
}

const encode = encodeURIComponent;

/**
 * A Vela server API client for the worker's calls. Every call takes a ctx (its cancellation
 * aborts the request and the retries), has a per-attempt timeout, and is retried on 5xx, network
 * errors and timeouts with capped exponential backoff with jitter; a call never ends the process,
 * it rejects with a {@link VelaApiError} (or the ctx's error).
 *
 * Differences from go-vela/sdk-go, on purpose: a non-2xx answer with a non-JSON body is an error
 * (the SDK reports it as success), and calls are retried (the Go worker never retries status or
 * log PUTs). Gotcha: `getExecutable` is not idempotent on the server (it deletes on read), so a
 * lost answer cannot be recovered by a retry; it stops retrying once the server says the
 * executable is gone.
 */
export class VelaClient {
  readonly address: string;
  readonly #token: string;
  readonly #options: VelaClientOptions;
  readonly #transport: Transport;

  constructor(options: VelaClientOptions) {
    this.address = options.address.replace(/\/+$/, '');
    this.#token = options.token;
    this.#options = options;
    this.#transport = options.transport ?? httpTransport;
  }

  /** The bearer token this client sends. */
  get token(): string {
    return this.#token;
  }

  /** A client with the same settings and another token (a build token, a refreshed auth token). */
  withToken(token: string): VelaClient {
    return new VelaClient({ ...this.#options, token });
  }

  // ---------------------------------------------------------------- worker life

  /** `GET /api/v1/queue/info` (registration token or secret). */
  queueInfo(ctx: Context, opts?: CallOptions): Promise<VelaQueueInfo> {
    return this.request<VelaQueueInfo>(ctx, 'GET', '/api/v1/queue/info', undefined, opts);
  }

  /** `GET /api/v1/workers/{host}`; `undefined` when the server answers 404 (not registered). */
  async getWorker(ctx: Context, hostname: string, opts?: CallOptions): Promise<VelaWorker | undefined> {
    try {
      return await this.request<VelaWorker>(ctx, 'GET', `/api/v1/workers/${encode(hostname)}`, undefined, opts);
    } catch (e) {
      if (isVelaStatus(e, 404)) return undefined;
      throw e;
    }
  }

  /** `POST /api/v1/workers` → 201 `{token}`: the new auth token (or the secret, when registering with it). */
  async createWorker(ctx: Context, worker: VelaWorker, opts?: CallOptions): Promise<string> {
    return tokenOf(await this.request<VelaToken>(ctx, 'POST', '/api/v1/workers', worker, opts), 'POST /api/v1/workers');
  }

  /** `POST /api/v1/workers/{host}/refresh` → `{token}`. */
  async refreshWorker(ctx: Context, hostname: string, opts?: CallOptions): Promise<string> {
    const path = `/api/v1/workers/${encode(hostname)}/refresh`;
    return tokenOf(await this.request<VelaToken>(ctx, 'POST', path, undefined, opts), `POST ${path}`);
  }

  /** `PUT /api/v1/workers/{host}`. */
  updateWorker(ctx: Context, hostname: string, worker: VelaWorker, opts?: CallOptions): Promise<VelaWorker> {
    return this.request<VelaWorker>(ctx, 'PUT', `/api/v1/workers/${encode(hostname)}`, worker, opts);
  }

  /**
   * `GET {server}/validate-token` with `token` as the bearer: true when the server says it is its
   * own token (200), false for a 4xx. Used by the worker's API to authenticate the server.
   */
  async validateServerToken(ctx: Context, token: string, opts?: CallOptions): Promise<boolean> {
    try {
      await this.withToken(token).request<unknown>(ctx, 'GET', '/validate-token', undefined, opts);
      return true;
    } catch (e) {
      if (e instanceof VelaApiError && e.kind === 'http' && e.status >= 400 && e.status < 500) return false;
      throw e;
    }
  }

  // ---------------------------------------------------------------- build

  /** `GET …/builds/{n}/token` (worker auth token) → a build token. 409: the build is no longer pending. */
  async buildToken(ctx: Context, org: string, repo: string, build: number, opts?: CallOptions): Promise<string> {
    const path = `${buildPath(org, repo, build)}/token`;
    return tokenOf(await this.request<VelaToken>(ctx, 'GET', path, undefined, opts), `GET ${path}`);
  }

  /**
   * `GET …/builds/{n}/install_token` (build token, header `Token: <current install token>`) → a
   * fresh SCM install token and its expiration (Unix seconds). Server `api/build/refresh_install.go`
   * RefreshInstallToken: 400 unless the build is pending or running, 401 when the `Token` is not
   * one it minted. Not retried after a 4xx: the server evicts the old token when it mints a new one.
   */
  async refreshInstallToken(
    ctx: Context,
    org: string,
    repo: string,
    build: number,
    installToken: string,
    opts?: CallOptions,
  ): Promise<{ token: string; expiration: number }> {
    const path = `${buildPath(org, repo, build)}/install_token`;
    const t = await this.request<VelaToken>(ctx, 'GET', path, undefined, { retry: { attempts: 2 }, ...opts, headers: { token: installToken } });
    return { token: tokenOf(t, `GET ${path}`), expiration: typeof t?.expiration === 'number' ? t.expiration : 0 };
  }

  /**
   * `POST …/builds/{n}/install_token` (build token) with `{repositories, permissions}` → an install
   * token scoped to those repositories (a step's `git.token`). Server `api/build/post_install.go`
   * PostInstallToken: 400 unless the build is running and the repo has an installation id.
   */
  async postInstallToken(
    ctx: Context,
    org: string,
    repo: string,
    build: number,
    request: { repositories: string[]; permissions: Record<string, string> },
    opts?: CallOptions,
  ): Promise<{ token: string; expiration: number }> {
    const path = `${buildPath(org, repo, build)}/install_token`;
    const t = await this.request<VelaToken>(ctx, 'POST', path, request, { retry: { attempts: 2 }, ...opts });
    return { token: tokenOf(t, `POST ${path}`), expiration: typeof t?.expiration === 'number' ? t.expiration : 0 };
  }

  /**
   * `GET …/builds/{n}/id_request_token?image=&request=&commands=true` (build token) → the token a
   * step exchanges for an OIDC token (server `api/build/id_request_token.go` GetIDRequestToken;
   * `commands` is omitted when false, as the SDK's query encoder does).
   */
  async idRequestToken(
    ctx: Context,
    org: string,
    repo: string,
    build: number,
    request: { image: string; request: string; commands: boolean },
    opts?: CallOptions,
  ): Promise<string> {
    const q = new URLSearchParams({ image: request.image, request: request.request });
    if (request.commands) q.set('commands', 'true');
    const path = `${buildPath(org, repo, build)}/id_request_token`;
    return tokenOf(await this.request<VelaToken>(ctx, 'GET', `${path}?${q.toString()}`, undefined, opts), `GET ${path}`);
  }

  /**
   * `GET …/builds/{n}/executable` (build token) → the executable and its decoded pipeline JSON.
   * The server deletes the executable on read: a retry after a lost answer gets a 500, so retries
   * stop when the server says it cannot pop it.
   */
  async getExecutable(ctx: Context, org: string, repo: string, build: number, opts?: CallOptions): Promise<{ executable: VelaExecutable; pipeline: unknown }> {
    const path = `${buildPath(org, repo, build)}/executable`;
    const executable = await this.request<VelaExecutable>(ctx, 'GET', path, undefined, {
      ...opts,
      shouldRetry: (e) => !(e.kind === 'http' && /pop build executable/i.test(e.serverMessage ?? '')) && (opts?.shouldRetry?.(e) ?? true),
    });
    if (typeof executable?.data !== 'string') {
      throw new VelaApiError({ kind: 'bad-response', status: 200, method: 'GET', path, serverMessage: 'executable has no data', attempts: 1 });
    }
    let pipeline: unknown;
    try {
      pipeline = JSON.parse(Buffer.from(executable.data, 'base64').toString('utf8'));
    } catch (e) {
      throw new VelaApiError({
        kind: 'bad-response',
        status: 200,
        method: 'GET',
        path,
        serverMessage: 'executable data is not base64 JSON',
        attempts: 1,
        cause: e,
      });
    }
    return { executable, pipeline };
  }

  /** `GET …/builds/{n}`. */
  getBuild(ctx: Context, org: string, repo: string, build: number, opts?: CallOptions): Promise<VelaBuild> {
    return this.request<VelaBuild>(ctx, 'GET', buildPath(org, repo, build), undefined, opts);
  }

  /** `PUT …/builds/{n}` with the whole build; the answer is the stored build. */
  updateBuild(ctx: Context, org: string, repo: string, build: VelaBuild & { number: number }, opts?: CallOptions): Promise<VelaBuild> {
    return this.request<VelaBuild>(ctx, 'PUT', buildPath(org, repo, build.number), build, opts);
  }

  /** `PUT …/steps/{n}`. */
  updateStep(ctx: Context, org: string, repo: string, build: number, step: VelaStep & { number: number }, opts?: CallOptions): Promise<VelaStep> {
    return this.request<VelaStep>(ctx, 'PUT', `${buildPath(org, repo, build)}/steps/${step.number}`, step, opts);
  }

  /** `PUT …/services/{n}`. */
  updateService(ctx: Context, org: string, repo: string, build: number, service: VelaService & { number: number }, opts?: CallOptions): Promise<VelaService> {
    return this.request<VelaService>(ctx, 'PUT', `${buildPath(org, repo, build)}/services/${service.number}`, service, opts);
  }

  /** `GET …/steps/{n}/logs` or `…/services/{n}/logs`. */
  getLog(ctx: Context, org: string, repo: string, build: number, kind: 'steps' | 'services', number: number, opts?: CallOptions): Promise<VelaLog> {
    return this.request<VelaLog>(ctx, 'GET', `${buildPath(org, repo, build)}/${kind}/${number}/logs`, undefined, opts);
  }

  /**
   * `PUT …/steps/{n}/logs` or `…/services/{n}/logs` with `data` = base64 of the **whole** log: the
   * server replaces what it stored (when `data` is non-empty).
   */
  async updateLog(
    ctx: Context,
    org: string,
    repo: string,
    build: number,
    kind: 'steps' | 'services',
    number: number,
    log: Uint8Array,
    opts?: CallOptions,
  ): Promise<void> {
    const body: VelaLog = { data: Buffer.from(log.buffer, log.byteOffset, log.byteLength).toString('base64') };
    await this.request<unknown>(ctx, 'PUT', `${buildPath(org, repo, build)}/${kind}/${number}/logs`, body, opts);
  }

  /**
   * `GET /api/v1/secrets/{engine}/{type}/{org}/{name}/{key}` (build token: the answer has the
   * `value`). `name` is `*` for org secrets, the repo for repo secrets, the team for shared ones.
   */
  getSecret(ctx: Context, engine: string, type: string, org: string, name: string, key: string, opts?: CallOptions): Promise<VelaSecret> {
    const path = `/api/v1/secrets/${encode(engine)}/${encode(type)}/${encode(org)}/${encode(name)}/${key.split('/').map(encode).join('/')}`;
    return this.request<VelaSecret>(ctx, 'GET', path, undefined, opts);
  }

  // ---------------------------------------------------------------- transport

  /**
   * One API call with retries: JSON body in, JSON body out (`null` for an empty body).
   * Rejects with {@link VelaApiError}, or with the ctx's error when the ctx ends.
   */
  async request<T>(ctx: Context, method: string, path: string, body?: unknown, opts: CallOptions = {}): Promise<T> {
    const retry = { ...this.#options.retry, ...opts.retry };
    const attempts = Math.max(1, retry.attempts ?? 5);
    const base = retry.baseDelayMs ?? 500;
    const cap = retry.maxDelayMs ?? 30_000;
    for (let attempt = 1; ; attempt++) {
      if (ctx.signal.aborted) throw errOf(ctx);
      try {
        return await this.#attempt<T>(ctx, method, path, body, attempt, opts.headers);
      } catch (e) {
        if (!(e instanceof VelaApiError)) throw e;
        const again = e.retryable && attempt < attempts && (opts.shouldRetry?.(e) ?? true);
        if (!again) throw e;
        // Capped exponential backoff with jitter: a random delay in [d/2, d].
        const d = Math.min(cap, base * 2 ** (attempt - 1));
        const delay = Math.round(d / 2 + (Math.random() * d) / 2);
        this.#options.logger?.warn({ method, path, attempt, delayMs: delay, err: e.message }, 'vela api call failed, retrying');
        await sleep(ctx, delay);
      }
    }
  }

  async #attempt<T>(ctx: Context, method: string, path: string, body: unknown, attempt: number, headers: Record<string, string> = {}): Promise<T> {
    const [callCtx, cancel] = withTimeout(ctx, this.#options.timeoutMs ?? 15_000);
    try {
      let res: TransportResponse;
      try {
        res = await this.#transport(this.address + path, {
          method,
          headers: {
            authorization: `Bearer ${this.#token}`,
            'content-type': 'application/json',
            accept: 'application/json',
            'user-agent': this.#options.userAgent ?? 'berth-worker (vela-sdk-go compatible)',
            ...headers,
          },
          ...(body === undefined ? {} : { body: JSON.stringify(body) }),
          signal: callCtx.signal,
        });
      } catch (e) {
        if (ctx.signal.aborted) throw errOf(ctx);
        const kind = callCtx.signal.aborted ? 'timeout' : 'network';
        throw new VelaApiError({ kind, status: 0, method, path, attempts: attempt, cause: kind === 'network' ? e : undefined });
      }
      let text: string;
      try {
        text = await res.text();
      } catch (e) {
        if (ctx.signal.aborted) throw errOf(ctx);
        const kind = callCtx.signal.aborted ? 'timeout' : 'network';
        throw new VelaApiError({ kind, status: 0, method, path, attempts: attempt, cause: e });
      }
      let json: unknown;
      let parsed = true;
      try {
        json = text === '' ? null : JSON.parse(text);
      } catch {
        parsed = false;
      }
      if (!res.ok) {
        const serverMessage = parsed
          ? typeof (json as { error?: unknown } | null)?.error === 'string'
            ? (json as { error: string }).error
            : typeof json === 'string'
              ? json
              : undefined
          : text.slice(0, 120);
        throw new VelaApiError({ kind: 'http', status: res.status, method, path, serverMessage, attempts: attempt });
      }
      if (!parsed) {
        throw new VelaApiError({ kind: 'bad-response', status: res.status, method, path, serverMessage: text.slice(0, 120), attempts: attempt });
      }
      return json as T;
    } finally {
      cancel();
    }
  }
}

function buildPath(org: string, repo: string, build: number): string {
  return `/api/v1/repos/${encode(org)}/${encode(repo)}/builds/${build}`;
}

function tokenOf(t: VelaToken | null, what: string): string {
  if (typeof t?.token !== 'string' || t.token === '') {
    const [method = '', path = ''] = what.split(' ');
    throw new VelaApiError({ kind: 'bad-response', status: 200, method, path, serverMessage: 'no token in the answer', attempts: 1 });
  }
  return t.token;
}
