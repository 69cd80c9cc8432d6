// The server's side of the queue: a build is created, compiled and published as
// go-vela/server api/build/compile_publish.go CompileAndPublish and api/build/enqueue.go Enqueue
// do, and its item is pushed signed (queue/redis/push.go Push: NaCl combined Ed25519 signature ‖
// JSON, RPUSH).

import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { now } from './auth.ts';
import type { SimContext } from './context.ts';
import { netrcPassword } from './routes/scm.ts';
import { type QueueKeys, signCombined } from './signing.ts';
import type { VelaBuild, VelaQueueItem, VelaRepo } from './types.ts';

/** go-vela/server's queue/models.ItemVersion. */
export const ITEM_VERSION = 3;

/** Arguments of `VelaSim.enqueueBuild`. */
export interface EnqueueBuildOptions {
  org: string;
  repo: string;
  /** Build number; default: the repo's next. */
  number?: number;
  /** The compiled pipeline (go-vela's pipeline.Build JSON): stored as the build's executable and planned into step and service records. */
  pipeline: Record<string, unknown>;
  /** Queue route (the Redis list key). Default: the first of `routes`, i.e. `vela`. */
  route?: string;
  /** Extra build fields (event, branch, …). */
  build?: Partial<VelaBuild>;
  /** Extra repo fields when the repo is created (timeout, trusted, …). */
  repoFields?: Partial<VelaRepo>;
  /** Item version to put in the queue item (default {@link ITEM_VERSION}). */
  itemVersion?: number;
  /** Do not push to Redis (only create build, executable and records). */
  noPush?: boolean;
}

/** What `VelaSim.enqueueBuild` created. */
export interface EnqueuedBuild {
  build: VelaBuild;
  item: VelaQueueItem;
  /** The exact bytes pushed (signature ‖ JSON). */
  signed: Buffer;
  route: string;
}

/** Signs with the queue key and pushes to Redis (one connection, made on first use). */
export class QueuePublisher {
  readonly #keys: QueueKeys;
  readonly #addr: string;
  #redis: Redis | undefined;

  constructor(keys: QueueKeys, addr: string) {
    this.#keys = keys;
    this.#addr = addr;
  }

  /** The Redis connection (created on first use). */
  redis(): Redis {
    this.#redis ??= new Redis(this.#addr, { lazyConnect: false, maxRetriesPerRequest: 3 });
    return this.#redis;
  }

  /** Signs `message` in NaCl combined format with the queue key. */
  sign(message: Buffer | string): Buffer {
    return signCombined(this.#keys.privateKey, Buffer.from(message));
  }

  /** Closes the Redis connection, if one was made. */
  close(): void {
    if (this.#redis) {
      this.#redis.disconnect();
      this.#redis = undefined;
    }
  }
}

/**
 * Creates a repo (if new) and a pending build, stores its executable, plans its step and
 * service records with empty logs (as the server does at compile time), and pushes the signed
 * queue item with RPUSH to the route.
 */
export async function enqueueBuild(ctx: SimContext, publisher: QueuePublisher, options: EnqueueBuildOptions): Promise<EnqueuedBuild> {
  const { state } = ctx;
  const repo = state.repo(options.org, options.repo, options.repoFields);
  const counter = ((repo.counter as number | undefined) ?? 0) + 1;
  const number = options.number ?? counter;
  repo.counter = Math.max(counter, number);
  const route = options.route ?? 'vela';
  const t = now();
  const build: VelaBuild = {
    id: state.nextId(),
    number,
    event: 'push',
    status: 'pending',
    branch: 'main',
    ref: 'refs/heads/main',
    commit: randomBytes(20).toString('hex'),
    created: t,
    route,
    ...options.build,
    repo: { ...repo },
  };
  state.builds.set(build.id!, build);
  // Server api/build/compile_publish.go: the executable carries the SCM token the worker hands the
  // containers (scm/github/repo.go GetNetrcPassword: an installation token with its expiry when the
  // repo has an installation id, else the repo owner's OAuth token with expiry 0).
  const scm = netrcPassword(ctx, build, repo);
  const pipeline = {
    ...options.pipeline,
    id: options.pipeline.id ?? `${options.org}_${options.repo}_${number}`,
    token: scm.token,
    token_exp: scm.expiration,
  };
  state.executables.set(build.id!, {
    id: state.nextId(),
    build_id: build.id!,
    data: Buffer.from(JSON.stringify(pipeline)).toString('base64'),
  });
  state.plan(build, pipeline);
  const item: VelaQueueItem = { build: { ...build }, item_version: options.itemVersion ?? ITEM_VERSION };
  const signed = publisher.sign(JSON.stringify(item));
  if (!options.noPush) await publisher.redis().rpush(route, signed);
  // S api/build/enqueue.go Enqueue: item.Build.SetEnqueued(now) and UpdateBuild only after the
  // push, so the item never carries `enqueued`; the stored build (and the answer to the worker's
  // PUTs) does.
  if (options.build?.enqueued === undefined) build.enqueued = now();
  return { build, item, signed, route };
}
