import type { Container } from '@berth/pipeline';
import type { RuntimeError } from '@berth/runtime';
import { MemoryFs } from './shell/fs.ts';
import type { Listener } from './shell/shell.ts';
import { LogStore } from './log.ts';

/** Who made a resource: the labels every runtime puts on what it creates. */
export interface Owner {
  workerId: string;
  buildId: string;
}

/** A container as the dummy engine holds it. */
export interface DummyContainer extends Owner {
  readonly id: string;
  /** Its host name on the build's network. */
  readonly name: string;
  readonly spec: Container;
  readonly image: string;
  state: 'created' | 'running' | 'exited';
  /** Started held (holdContainer) and not released: checked as at a start, its command not begun. */
  held?: { argv: string[]; identity: { uid: number; gid: number } } | undefined;
  exitCode?: number;
  reason?: string;
  /** Why it could not run; `waitContainer` rejects with it. */
  failure?: RuntimeError;
  readonly log: LogStore;
  /** Aborted to kill the container's processes. */
  readonly kill: AbortController;
  /** Resolves once the container has exited (or was removed before it ran). */
  readonly exited: Promise<void>;
  markExited(): void;
  /** Ports its servers listen on. */
  readonly listeners: Map<number, Listener>;
  /** Its own files (outside the workspace). */
  readonly fs: MemoryFs;
}

/** A network or volume as the dummy engine holds it. */
export interface DummyResource extends Owner {
  readonly name: string;
}

/**
 * The dummy's "engine": what a Docker daemon would hold, shared by every dummy runtime that uses
 * it (by default one per process), so a second runtime instance can reap what a first left behind.
 */
export class DummyEngine {
  readonly containers = new Map<string, DummyContainer>();
  readonly networks = new Map<string, DummyResource>();
  readonly volumes = new Map<string, DummyResource & { fs: MemoryFs }>();
  /** Normalised references of the images present. */
  readonly images = new Set<string>();

  /** A new container record in state `created`. */
  createContainer(spec: Container, image: string, owner: Owner): DummyContainer {
    let markExited = (): void => undefined;
    const exited = new Promise<void>((resolve) => (markExited = resolve));
    const container: DummyContainer = {
      ...owner,
      id: spec.id,
      name: spec.name,
      spec,
      image,
      state: 'created',
      log: new LogStore(),
      kill: new AbortController(),
      exited,
      markExited,
      listeners: new Map(),
      fs: new MemoryFs(),
    };
    this.containers.set(spec.id, container);
    return container;
  }

  /** Kills (if running) and forgets a container; resolves once its processes ended. */
  async destroyContainer(container: DummyContainer): Promise<void> {
    container.kill.abort();
    if (container.state === 'created') {
      container.state = 'exited';
      container.exitCode ??= 137;
      container.log.end();
      container.markExited();
    }
    await container.exited;
    this.containers.delete(container.id);
  }

  /** Resources of `workerId` (and of `buildId`, when given). */
  owned(workerId: string, buildId?: string): { containers: DummyContainer[]; networks: DummyResource[]; volumes: DummyResource[] } {
    const mine = (r: Owner): boolean => r.workerId === workerId && (buildId === undefined || r.buildId === buildId);
    return {
      containers: [...this.containers.values()].filter(mine),
      networks: [...this.networks.values()].filter(mine),
      volumes: [...this.volumes.values()].filter(mine),
    };
  }
}

/** The engine dummy runtimes share unless given their own: one per process, like one Docker daemon per host. */
export const DEFAULT_ENGINE = new DummyEngine();
