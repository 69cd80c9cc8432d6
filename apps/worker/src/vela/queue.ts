/**
 * The Vela build queue on Redis: BLPOP over the worker's routes, Ed25519 verification of each
 * item in NaCl `sign` format, parsing, the item version check, and push back.
 */
import { type KeyObject, createPublicKey, verify } from 'node:crypto';
import { type Context } from '@berth/context';
import { parseSentinelUrl, type SentinelAddress } from './sentinel-url.ts';
import { Redis, type RedisOptions } from 'ioredis';
import { z } from 'zod';
import type { VelaBuild } from './models.ts';

/** The queue item version this worker understands (go-vela/server queue/models.ItemVersion). */
export const SUPPORTED_ITEM_VERSION = 3;

/** A verified, parsed queue item: `{"build":{…,"repo":{…}},"item_version":3}`. */
export interface QueueItem {
  build: VelaBuild & { id: number; number: number; repo: NonNullable<VelaBuild['repo']> & { org: string; name: string } };
  item_version: number;
}

/** The raw entry as popped: where it came from and its exact bytes (signature ‖ JSON). */
export interface RawEntry {
  route: string;
  bytes: Buffer;
}

/**
 * What a pop gave. Every kind but `empty`, `canceled` and `error` consumed an entry from Redis:
 *
 * - `item`: verified and parsed, and its `item_version` is the supported one. Run it, or `pushBack` it.
 * - `stale`: verified and parsed, but queued by a server with another item version: Vela fails
 *   such a build (`status: error`) without running it.
 * - `bad-signature`: the bytes are not signed by the server's key. `unverified` is what the JSON
 *   inside claims, if readable: never trust it for more than a log line.
 * - `bad-item`: signed, but not JSON or not a queue item (`reason` says why).
 * - `empty`: the pop timeout passed with nothing queued.
 * - `canceled`: the ctx ended before anything was popped.
 * - `error`: Redis failed (connection lost, …); nothing was consumed.
 */
export type PopResult =
  | { kind: 'item'; item: QueueItem; entry: RawEntry }
  | { kind: 'stale'; item: QueueItem; version: number; entry: RawEntry }
  | { kind: 'bad-signature'; entry: RawEntry; unverified: UnverifiedBuild | undefined }
  | { kind: 'bad-item'; entry: RawEntry; reason: string; build: UnverifiedBuild | undefined }
  | { kind: 'empty' }
  | { kind: 'canceled' }
  | { kind: 'error'; error: Error };

/** Build coordinates read from an item that did not pass every check. */
export interface UnverifiedBuild {
  id?: number;
  number?: number;
  org?: string;
  repo?: string;
}

/** Options of {@link VelaQueue}. */
export interface VelaQueueOptions {
  /**
   * go-redis style URL: `redis://[user:pass@]host:port[/db]` or `rediss://…`. With `sentinel`,
   * `redis://[:pass@][master,sentinel1:26379,sentinel2:26379][/db]` (see {@link parseSentinelUrl}).
   */
  url: string;
  /** VELA_QUEUE_CLUSTER: connect through Redis Sentinel (go-redis NewFailoverClient). */
  sentinel?: boolean;
  /** The server's Ed25519 public key: padded standard base64 of 32 bytes (from `/api/v1/queue/info`). */
  publicKey: string;
  /** Routes to pop from, in priority order (default `['vela']`). */
  routes?: string[];
  /** BLPOP timeout in seconds (default 60; fractions allowed). */
  popTimeoutSec?: number;
  /** Extra ioredis options (tests). */
  redisOptions?: RedisOptions;
  /** Where connection errors go (a pino logger fits). */
  logger?: { warn(obj: object, msg: string): void };
}

const itemSchema = z.object({
  build: z
    .object({
      id: z.number().int(),
      number: z.number().int(),
      repo: z.object({ org: z.string().min(1), name: z.string().min(1) }).loose(),
    })
    .loose(),
  item_version: z.number().int().nonnegative().optional(),
});

/** Builds the Ed25519 public key object from Vela's base64 form; throws a clear error when malformed. */
function queuePublicKey(base64: string): KeyObject {
  const raw = Buffer.from(base64.trim(), 'base64');
  if (raw.length !== 32) throw new Error(`[vela] the queue public key must be the base64 of 32 bytes, got ${raw.length} bytes`);
  return createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: raw.toString('base64url') }, format: 'jwk' });
}

/** NaCl `sign.open`: the message when `signed` (64-byte signature ‖ message) verifies under `key`. */
function openSigned(key: KeyObject, signed: Buffer): Buffer | undefined {
  if (signed.length < 64) return undefined;
  const message = signed.subarray(64);
  try {
    return verify(null, message, key, signed.subarray(0, 64)) ? message : undefined;
  } catch {
    return undefined;
  }
}

/** Verifies and parses one raw entry (exported for tests and for entries read another way). */
function decodeEntry(key: KeyObject, entry: RawEntry): Exclude<PopResult, { kind: 'empty' | 'canceled' | 'error' }> {
  const message = openSigned(key, entry.bytes);
  if (!message) return { kind: 'bad-signature', entry, unverified: peekBuild(entry.bytes.subarray(Math.min(64, entry.bytes.length))) };
  let json: unknown;
  try {
    json = JSON.parse(message.toString('utf8'));
  } catch (e) {
    return { kind: 'bad-item', entry, reason: `not JSON: ${e instanceof Error ? e.message : String(e)}`, build: undefined };
  }
  const parsed = itemSchema.safeParse(json);
  if (!parsed.success) {
    const reason = parsed.error.issues.map((i) => `${i.path.join('.') || '(item)'}: ${i.message}`).join('; ');
    return { kind: 'bad-item', entry, reason: `not a queue item: ${reason}`, build: peekBuild(message) };
  }
  const item: QueueItem = { build: parsed.data.build, item_version: parsed.data.item_version ?? 0 };
  if (item.item_version !== SUPPORTED_ITEM_VERSION) return { kind: 'stale', item, version: item.item_version, entry };
  return { kind: 'item', item, entry };
}

function peekBuild(message: Buffer): UnverifiedBuild | undefined {
  try {
    const j = JSON.parse(message.toString('utf8')) as { build?: { id?: unknown; number?: unknown; repo?: { org?: unknown; name?: unknown } } };
    const b = j.build;
    if (!b || typeof b !== 'object') return undefined;
    const out: UnverifiedBuild = {};
    if (typeof b.id === 'number') out.id = b.id;
    if (typeof b.number === 'number') out.number = b.number;
    if (typeof b.repo?.org === 'string') out.org = b.repo.org;
    if (typeof b.repo?.name === 'string') out.repo = b.repo.name;
    return Object.keys(out).length > 0 ? out : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The worker's view of the Vela queue. Each concurrent `pop` uses its own blocking connection
 * (kept for reuse); a second connection serves `pushBack`, `ping` and cancellation.
 *
 * Cancellation: when the ctx ends during a BLPOP, the pop is woken with `CLIENT UNBLOCK`, so an
 * entry is never lost to a dropped connection: if one arrived at that moment it is returned (the
 * caller runs it or pushes it back), otherwise the result is `canceled`.
 *
 * Gotcha: call `close()`; it disconnects every connection (a pending pop then ends as `error`).
 */
export class VelaQueue {
  readonly routes: string[];
  readonly #key: KeyObject;
  readonly #options: VelaQueueOptions;
  readonly #idle: Redis[] = [];
  readonly #all = new Set<Redis>();
  #control: Redis | undefined;
  #closed = false;

  constructor(options: VelaQueueOptions) {
    this.#options = options;
    this.#key = queuePublicKey(options.publicKey);
    this.routes = options.routes && options.routes.length > 0 ? [...options.routes] : ['vela'];
  }

  #connect(): Redis {
    const base = { maxRetriesPerRequest: 2, ...this.#options.redisOptions };
    const conn = this.#options.sentinel ? new Redis({ ...sentinelOptions(parseSentinelUrl(this.#options.url)), ...base }) : new Redis(this.#options.url, base);
    // ioredis emits 'error' on every failed reconnect: without a listener Node would throw.
    conn.on('error', (err: Error) => this.#options.logger?.warn({ err: err.message }, 'redis connection error'));
    this.#all.add(conn);
    return conn;
  }

  #controlConn(): Redis {
    this.#control ??= this.#connect();
    return this.#control;
  }

  /**
   * BLPOP over `routes` (default: the queue's routes) for up to the pop timeout, then verify and
   * parse what came. Never rejects: failures are results.
   */
  async pop(ctx: Context, routes: string[] = this.routes): Promise<PopResult> {
    if (this.#closed) return { kind: 'error', error: new Error('[vela] queue is closed') };
    if (ctx.signal.aborted) return { kind: 'canceled' };
    const conn = this.#idle.pop() ?? this.#connect();
    const timeout = this.#options.popTimeoutSec ?? 60;
    let unblocking: Promise<void> | undefined;
    let settled = false;
    let connId: number | undefined;
    const onAbort = (): void => {
      unblocking ??= this.#unblock(
        conn,
        () => connId,
        () => settled,
      );
    };
    try {
      connId = Number(await conn.client('ID'));
      if (ctx.signal.aborted) return { kind: 'canceled' };
      ctx.signal.addEventListener('abort', onAbort, { once: true });
      const reply = await conn.blpopBuffer(routes, timeout);
      settled = true;
      if (!reply) return ctx.signal.aborted ? { kind: 'canceled' } : { kind: 'empty' };
      const [route, bytes] = reply;
      return decodeEntry(this.#key, { route: route.toString('utf8'), bytes });
    } catch (e) {
      settled = true;
      // The connection may be in an unknown state: drop it rather than reuse it.
      this.#drop(conn);
      return ctx.signal.aborted ? { kind: 'canceled' } : { kind: 'error', error: e instanceof Error ? e : new Error(String(e)) };
    } finally {
      settled = true;
      ctx.signal.removeEventListener('abort', onAbort);
      if (unblocking) await unblocking;
      if (this.#all.has(conn) && !this.#closed) this.#idle.push(conn);
    }
  }

  /**
   * Sends `CLIENT UNBLOCK` until the pop returns: the BLPOP may not have reached Redis yet, or Redis
   * may have answered it already (UNBLOCK then says 0 while the reply is on its way). It keeps
   * trying for the pop's own timeout and 5 s more: any BLPOP Redis received has returned by then,
   * so dropping the connection afterwards cannot lose an entry Redis handed out.
   */
  async #unblock(conn: Redis, id: () => number | undefined, done: () => boolean): Promise<void> {
    const deadline = Date.now() + (this.#options.popTimeoutSec ?? 60) * 1000 + 5_000;
    let pauseMs = 50;
    while (!done() && Date.now() < deadline) {
      const cid = id();
      if (cid !== undefined) {
        try {
          const n = await this.#controlConn().client('UNBLOCK', cid);
          if (Number(n) === 1) return;
        } catch {
          break;
        }
      }
      await new Promise((r) => setTimeout(r, pauseMs));
      pauseMs = Math.min(pauseMs * 2, 1_000);
    }
    // The BLPOP never answered (Redis unreachable): drop the connection.
    if (!done()) this.#drop(conn);
  }

  #drop(conn: Redis): void {
    this.#all.delete(conn);
    const i = this.#idle.indexOf(conn);
    if (i >= 0) this.#idle.splice(i, 1);
    conn.disconnect();
  }

  /**
   * Returns a popped entry to the **head** of its route (LPUSH): it was the oldest, so it is the
   * next one popped, by this worker or another. The bytes go back unchanged, signature included.
   */
  async pushBack(entry: RawEntry): Promise<void> {
    await this.#controlConn().lpush(entry.route, entry.bytes);
  }

  /** Redis PING (the check-in's queue check): true on PONG. */
  async ping(): Promise<boolean> {
    try {
      return (await this.#controlConn().ping()) === 'PONG';
    } catch {
      return false;
    }
  }

  /** Disconnects every connection. Idempotent. */
  close(): void {
    this.#closed = true;
    for (const c of this.#all) c.disconnect();
    this.#all.clear();
    this.#idle.length = 0;
    this.#control = undefined;
  }
}

/** ioredis options of a Sentinel address (the password is the master's, as go-redis FailoverOptions.Password). */
function sentinelOptions(a: SentinelAddress): RedisOptions {
  return {
    sentinels: a.sentinels,
    name: a.masterName,
    db: a.db,
    ...(a.password === undefined ? {} : { password: a.password }),
    ...(a.username === undefined ? {} : { username: a.username }),
    ...(a.tls ? { tls: {}, enableTLSForSentinelMode: true } : {}),
  };
}
