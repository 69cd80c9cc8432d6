/**
 * What the Docker runtime keeps between calls, and the helpers every resource group uses: one
 * engine call under a ctx, creations the removals wait for, removals that take a missing resource
 * in their stride. The facade (runtime.ts) owns one; containers.ts, images.ts,
 * networks-volumes.ts, outputs.ts, build.ts and logs.ts act on it.
 */
import type { Duplex } from 'node:stream';
import type { Context } from '@berth/context';
import type { Container } from '@berth/pipeline';
import { LABELS, labelValue, type RuntimeConfig, type RuntimeError, type RuntimeEvent } from '@berth/runtime';
import type Docker from 'dockerode';
import { engineCall } from './call.ts';
import type { EngineConnection } from './connection.ts';
import { type ContainerLimits, engineName } from './container-spec.ts';
import { type EngineDescription, engineMessage, runtimeError, statusOf, type Where } from './errors.ts';
import { type ResolvedImage, resolveImage } from './image-ref.ts';
import type { PendingAttach } from './logs.ts';
import { ExitEvents } from './exit-events.ts';
import { pullImage } from './pull.ts';
import type { AllowedVolume } from './volumes.ts';

/** docker-modem's request function (untyped in @types/dockerode). */
export interface Dialer {
  dial(options: object, callback: (error: Error | null, data: unknown) => void): void;
}

/** What the runtime keeps about a container between calls. */
export interface ContainerRecord {
  /** The engine's container name. */
  readonly name: string;
  /** The engine's id of the container, once created (the `die` events name it: exit-events.ts). */
  id?: string | undefined;
  readonly buildId: string;
  /** The create request, kept until the container exists (creation waits for the pull with `on_start`). */
  body: Record<string, unknown> | undefined;
  /** Whether the container mounts the build's outputs volume (set up after setupOutputs). */
  readonly mountsOutputs: boolean;
  created: boolean;
  /**
   * The exit, subscribed before start; settles when the container ends: from the `die` event
   * (`oomKilled` and `killed` known) or the wait endpoint, whichever comes first.
   */
  exit: Promise<{ StatusCode: number; Error?: { Message?: string } | null; oomKilled?: boolean; killed?: boolean }> | undefined;
  /** Set once the exit above resolved: the container is not running (removal need not stop it). */
  exited: boolean;
  /** Aborts the exit subscription (on remove, on close). */
  waitController: AbortController | undefined;
  /** The attach opened before the start, until tailContainer claims it. */
  attach?: PendingAttach | undefined;
  /**
   * Started held (holdContainer) and not released yet: the attach's connection, whose stdin the
   * container's shell waits on. releaseContainer writes the go signal to it.
   */
  held?: Duplex | undefined;
}

/** The engine, the configuration and what the runtime created, shared by the resource groups. */
export class RuntimeState {
  readonly docker: Docker;
  readonly engine: EngineDescription;
  readonly connection: EngineConnection;
  readonly config: RuntimeConfig;
  readonly limits: ContainerLimits;
  readonly allowlist: readonly AllowedVolume[];
  readonly stopGraceMs: number;
  readonly logStallMs: number;
  readonly logBufferBytes: number;
  readonly workspacePath: string;
  readonly containers = new Map<string, ContainerRecord>();
  /** Builds whose network / volume this runtime created: containers join or mount only those. */
  readonly networks = new Set<string>();
  readonly volumes = new Set<string>();
  /** Builds with an outputs volume (setupOutputs): their containers mount it at `/vela/outputs`. */
  readonly outputs = new Set<string>();
  /**
   * Create requests still in the engine, per build id. A removal waits for them: the engine
   * finishes a create whose caller gave up, and a removal that ran first would leave it behind.
   */
  readonly creating = new Map<string, Set<Promise<void>>>();
  /** The engine's `die` events, read while a started container's exit is awaited. */
  readonly exitEvents: ExitEvents;
  closed = false;

  constructor(options: {
    connection: EngineConnection;
    config: RuntimeConfig;
    allowlist: readonly AllowedVolume[];
    limits: ContainerLimits;
    stopGraceMs: number;
    logStallMs: number;
    logBufferBytes: number;
    workspacePath: string;
  }) {
    this.connection = options.connection;
    this.docker = options.connection.docker;
    this.engine = options.connection.engine;
    this.config = options.config;
    this.allowlist = options.allowlist;
    this.limits = options.limits;
    this.stopGraceMs = options.stopGraceMs;
    this.logStallMs = options.logStallMs;
    this.logBufferBytes = options.logBufferBytes;
    this.workspacePath = options.workspacePath;
    this.exitEvents = new ExitEvents(this.docker, this.config.workerId);
  }

  /**
   * A create request that is not aborted with its caller's ctx: the caller still returns at once
   * when its ctx ends (engineCall races it), but the request goes on until the engine answers, and
   * the build's removals wait for that answer ({@link RuntimeState.creationsSettled}). An aborted create may
   * still be carried out by the engine after the client gave up, and then nothing would remove it.
   *
   * Gotcha: the request's socket outlives a cancelled call until the engine answers (a create is
   * short); the build's removal, bounded by its own ctx, is what waits for it.
   */
  creation<T>(buildId: string, request: () => Promise<T>): () => Promise<T> {
    return () => {
      const work = request();
      let pending = this.creating.get(buildId);
      if (!pending) {
        pending = new Set();
        this.creating.set(buildId, pending);
      }
      const set = pending;
      const settled: Promise<void> = work.then(
        () => undefined,
        () => undefined,
      );
      set.add(settled);
      void settled.then(() => {
        set.delete(settled);
        if (set.size === 0 && this.creating.get(buildId) === set) this.creating.delete(buildId);
      });
      return work;
    };
  }

  async creationsSettled(ctx: Context, buildId: string): Promise<void> {
    const pending = this.creating.get(buildId);
    if (!pending || pending.size === 0) return;
    await Promise.race([Promise.all(pending), ctx.done()]);
  }

  async removeNetworkNamed(ctx: Context, where: Where, name: string): Promise<void> {
    await this.call(
      ctx,
      where,
      (signal) => this.docker.getNetwork(name).remove({ abortSignal: signal }),
      undefined,
      (error) => (statusOf(error) === 404 ? null : undefined),
    );
  }

  async removeVolumeNamed(ctx: Context, where: Where, name: string): Promise<void> {
    await this.call(
      ctx,
      where,
      (signal) => this.docker.getVolume(name).remove({ abortSignal: signal }),
      { 409: 'Internal' },
      (error) => (statusOf(error) === 404 ? null : undefined),
    );
  }

  async forceRemoveContainer(ctx: Context, where: Where, name: string): Promise<void> {
    await this.call(
      ctx,
      where,
      (signal) => this.docker.getContainer(name).remove({ v: true, force: true, abortSignal: signal }),
      undefined,
      (error) => {
        const status = statusOf(error);
        if (status === 404) return null;
        if (status === 409 && /already in progress/i.test(engineMessage(error))) return null;
        return undefined;
      },
    );
  }

  /**
   * One engine call under ctx. `translate` sees raw engine errors first: it returns `null` to
   * swallow the error (the call then resolves with `undefined`), a RuntimeError to throw, or
   * `undefined` to fall back to the generic mapping.
   */
  async call<T>(
    ctx: Context,
    where: Where,
    fn: (signal: AbortSignal) => Promise<T>,
    overrides?: Parameters<typeof engineCall>[4],
    translate?: (error: unknown) => RuntimeError | null | undefined,
  ): Promise<T> {
    if (this.closed) throw runtimeError('Unavailable', 'the runtime was closed', where);
    if (!translate) return engineCall(ctx, where, this.engine, fn, overrides);
    return engineCall(
      ctx,
      where,
      this.engine,
      async (signal) => {
        try {
          return await fn(signal);
        } catch (error) {
          if (signal.aborted) throw error;
          const translated = translate(error);
          if (translated === null) return undefined as T;
          if (translated) throw translated;
          throw error;
        }
      },
      overrides,
    );
  }

  buildFilter(buildId: string): string[] {
    return [`${LABELS.worker}=${labelValue(this.config.workerId)}`, `${LABELS.build}=${labelValue(buildId)}`];
  }

  nameOf(container: Container): string {
    return this.containers.get(container.id)?.name ?? engineName(container.id);
  }

  forget(id: string): void {
    const record = this.containers.get(id);
    record?.waitController?.abort();
    record?.attach?.close();
    record?.held?.destroy();
    this.containers.delete(id);
  }

  resolve(container: Container, where: Where): ResolvedImage {
    try {
      return resolveImage(container.image);
    } catch (error) {
      throw runtimeError(
        'InvalidConfig',
        `image ${JSON.stringify(container.image)} is not a valid image reference: ${error instanceof Error ? error.message : String(error)}`,
        where,
        error,
      );
    }
  }

  emit(event: RuntimeEvent): void {
    try {
      this.config.onEvent?.(event);
    } catch {
      // onEvent must not throw; if it does, the build goes on.
    }
  }

  async pull(ctx: Context, where: Where, container: Container, image: ResolvedImage, buildId: string): Promise<void> {
    this.emit({ type: 'notice', buildId, containerId: container.id, reason: 'Pulling', message: `pulling image ${image.reference}` });
    await pullImage(ctx, this.docker, this.engine, where, image, (progress) =>
      this.emit({
        type: 'pull',
        buildId,
        containerId: container.id,
        image: image.reference,
        status: progress.id ? `${progress.id}: ${progress.status}` : progress.status,
        ...(progress.current !== undefined ? { current: progress.current } : {}),
        ...(progress.total !== undefined ? { total: progress.total } : {}),
      }),
    );
  }
}
