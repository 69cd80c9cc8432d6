import { spawn, type ChildProcess } from 'node:child_process';
import { constants as fsConstants } from 'node:fs';
import { access, mkdir, open, readdir, readFile, rm, rmdir, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Readable } from 'node:stream';
import {
  labelValue,
  RuntimeError,
  sleep,
  withTimeout,
  background,
  type Build,
  type Container,
  type ContainerExit,
  type ContainerStatus,
  type Context,
  type ReapReport,
  type Runtime,
  type RuntimeConfig,
  type RuntimeErrorCode,
} from '@berth/runtime';
import { followLogFile } from './log-file.ts';
import { buildLayout, hostDirectory, mapWorkspacePath, workerDir, type BuildLayout } from './paths.ts';

/** Options of {@link hostRuntime}. */
export interface HostRuntimeOptions {
  /** Where builds live, one directory per worker and build. Default `<os.tmpdir()>/berth-host`. */
  root?: string;
  /**
   * The worker's environment variables steps receive, by name. Default `PATH`, `LANG`, `LC_ALL`,
   * `TZ`, `TMPDIR`. Nothing else of the worker's environment reaches a step: secrets reach steps
   * only through the step's own environment, as the executor sets it.
   */
  inheritEnv?: readonly string[];
  /** Receives the no-isolation warning at every create. Default: `process.emitWarning` (code `BERTH_HOST_NO_ISOLATION`), once per process. */
  warn?: (message: string) => void;
}

/** The warning every host runtime gives: it is the first line of each build's init log too. */
export const NO_ISOLATION_WARNING =
  "the host runtime gives no isolation: steps run as local processes with the worker's user, files, network and privileges; " +
  'images, services, networks, volumes, user and privileged are not supported. Run only pipelines you trust.';

const DEFAULT_INHERIT = ['PATH', 'LANG', 'LC_ALL', 'TZ', 'TMPDIR'];
/** Set in every step's environment; reap kills a leftover process group only when it carries its build's value. */
const BUILD_MARKER = 'BERTH_HOST_BUILD';

interface HostStep {
  container: Container;
  layout: BuildLayout;
  buildKey: string;
  argv: string[];
  cwd: string;
  env: Record<string, string>;
  logFile: string;
  pidFile: string;
  state: ContainerStatus['state'];
  child?: ChildProcess;
  exit?: ContainerExit;
  exited: Promise<ContainerExit>;
  settle: (exit: ContainerExit) => void;
}

/**
 * The host runtime: every step is a local process (`entrypoint` + `commands`, as `/bin/sh -c` for a
 * Vela build script) started in a per-build workspace, as GitLab Runner's shell executor and
 * Woodpecker's local backend do (woodpecker-ci/woodpecker pipeline/backend/local/local.go: `Setup`
 * makes `workspace` and `home` under a per-workflow directory, `execCommands` sends stderr to the
 * same output as stdout, `Destroy` removes the directory). stdout and stderr go to one log file,
 * so their order is the order of the writes; tails follow that file.
 *
 * Gotcha: nothing is isolated. Images are ignored; services (detached containers), volumes,
 * `user` and privileges are refused with `InvalidConfig`; steps share the host's network.
 */
export class HostRuntime implements Runtime {
  readonly name = 'host';
  readonly #config: RuntimeConfig;
  readonly #root: string;
  readonly #inherit: readonly string[];
  readonly #workspacePath: string;
  readonly #steps = new Map<string, HostStep>();
  readonly #layouts = new Map<string, BuildLayout>();

  constructor(config: RuntimeConfig, options: HostRuntimeOptions = {}) {
    this.#config = config;
    this.#root = options.root ?? path.join(os.tmpdir(), 'berth-host');
    this.#inherit = options.inheritEnv ?? DEFAULT_INHERIT;
    this.#workspacePath = config.workspacePath ?? '/vela';
  }

  // ---- build -------------------------------------------------------------------------------

  inspectBuild(ctx: Context, build: Build): Promise<string> {
    return this.#guard(ctx, 'inspectBuild', build.id, () => {
      const layout = this.#layout(build);
      return Promise.resolve(
        `WARNING: ${NO_ISOLATION_WARNING}\nbuild directory: ${layout.dir}\nworkspace: ${layout.workspace} (steps see ${this.#workspacePath} mapped onto it)\n`,
      );
    });
  }

  setupBuild(ctx: Context, build: Build): Promise<void> {
    return this.#guard(ctx, 'setupBuild', build.id, async () => {
      const layout = this.#layout(build);
      for (const dir of [layout.dir, layout.home, layout.logs, layout.pids]) await mkdir(dir, { recursive: true, mode: 0o700 });
    });
  }

  assembleBuild(ctx: Context, build: Build): Promise<void> {
    return this.#guard(ctx, 'assembleBuild', build.id, () => Promise.resolve());
  }

  removeBuild(ctx: Context, build: Build): Promise<void> {
    return this.#guard(ctx, 'removeBuild', build.id, async () => {
      const layout = this.#layout(build);
      for (const [id, step] of [...this.#steps].filter(([, s]) => s.layout.dir === layout.dir)) {
        await this.#stop(ctx, step);
        this.#steps.delete(id);
      }
      await killLeftovers(layout, labelValue(build.id));
      await rm(layout.dir, { recursive: true, force: true });
      this.#layouts.delete(build.id);
    });
  }

  // ---- container ---------------------------------------------------------------------------

  setupContainer(ctx: Context, container: Container, build: Build): Promise<void> {
    return this.#guard(ctx, 'setupContainer', container.id, async () => {
      const refuse = (detail: string): never => {
        throw new RuntimeError('InvalidConfig', detail, { runtime: this.name, operation: 'setupContainer', subject: container.id });
      };
      if (container.detach)
        refuse(`${container.name} is a service (detached); the host runtime does not run services. Run it with the docker or kubernetes runtime.`);
      if (container.user !== '' && !isCurrentUser(container.user)) {
        refuse(
          `${container.name} asks for user ${JSON.stringify(container.user)}; the host runtime runs every step as the worker's user (${os.userInfo().username}).`,
        );
      }
      if (container.volumes.length > 0) refuse(`${container.name} mounts volumes; the host runtime has no mounts (steps see the host's files).`);
      const argv = [...container.entrypoint, ...container.commands];
      if (argv.length === 0) refuse(`${container.name} has neither entrypoint nor commands; the host runtime has no image whose default command it could run.`);
      const layout = this.#layout(build);
      const cwd = hostDirectory(container.directory, this.#workspacePath, layout.workspace);
      if (cwd === undefined) {
        refuse(
          `${container.name}'s directory ${JSON.stringify(container.directory)} is outside the workspace (${this.#workspacePath}); the host runtime runs steps only inside the build's workspace.`,
        );
      }
      const env: Record<string, string> = {};
      for (const name of this.#inherit) {
        const value = process.env[name];
        if (value !== undefined) env[name] = value;
      }
      for (const [name, value] of Object.entries(container.environment)) env[name] = mapWorkspacePath(value, this.#workspacePath, layout.workspace) ?? value;
      env.HOME = layout.home;
      env[BUILD_MARKER] = labelValue(build.id);
      const file = labelValue(container.id) || 'container';
      const logFile = path.join(layout.logs, `${file}.log`);
      await writeFile(logFile, '');
      let settle: (exit: ContainerExit) => void = () => undefined;
      const exited = new Promise<ContainerExit>((resolve) => (settle = resolve));
      this.#steps.set(container.id, {
        container,
        layout,
        buildKey: labelValue(build.id),
        argv,
        cwd: cwd as string,
        env,
        logFile,
        pidFile: path.join(layout.pids, `${file}.pid`),
        state: 'created',
        exited,
        settle,
      });
    });
  }

  runContainer(ctx: Context, container: Container): Promise<void> {
    return this.#guard(ctx, 'runContainer', container.id, async () => {
      const step = this.#step(container, 'runContainer');
      if (step.state !== 'created')
        throw new RuntimeError('InvalidConfig', 'the step was started already', { runtime: this.name, operation: 'runContainer', subject: container.id });
      await mkdir(step.cwd, { recursive: true });
      const log = await open(step.logFile, 'a');
      const [command = '', ...args] = step.argv;
      try {
        const child = spawn(command, args, { cwd: step.cwd, env: step.env, stdio: ['ignore', log.fd, log.fd], detached: true });
        step.child = child;
        step.state = 'running';
        child.once('exit', (code, signal) => {
          const exit: ContainerExit = { exitCode: code ?? 128 + (signal ? os.constants.signals[signal] : 0) };
          if (signal) exit.reason = signal;
          step.exit = exit;
          step.state = 'exited';
          void rm(step.pidFile, { force: true }).catch(() => undefined);
          step.settle(exit);
        });
        await new Promise<void>((resolve, reject) => {
          child.once('spawn', resolve);
          child.once('error', reject);
        });
        await writeFile(step.pidFile, String(child.pid));
      } catch (error) {
        const exit = { exitCode: 127, reason: 'ContainerCannotRun' };
        step.exit = exit;
        step.state = 'exited';
        step.settle(exit);
        const detail =
          (error as NodeJS.ErrnoException).code === 'ENOENT'
            ? `${JSON.stringify(command)} was not found on this host (PATH=${step.env.PATH ?? ''})`
            : String((error as Error).message);
        throw new RuntimeError('ContainerFailed', `cannot start ${container.name}: ${detail}`, {
          runtime: this.name,
          operation: 'runContainer',
          subject: container.id,
          cause: error,
        });
      } finally {
        await log.close();
      }
    });
  }

  inspectContainer(ctx: Context, container: Container): Promise<ContainerStatus> {
    return this.#guard(ctx, 'inspectContainer', container.id, () => {
      const step = this.#step(container, 'inspectContainer');
      const status: ContainerStatus = { state: step.state };
      if (step.exit) {
        status.exitCode = step.exit.exitCode;
        if (step.exit.reason !== undefined) status.reason = step.exit.reason;
      }
      return Promise.resolve(status);
    });
  }

  waitContainer(ctx: Context, container: Container): Promise<ContainerExit> {
    return this.#guard(ctx, 'waitContainer', container.id, async () => {
      const step = this.#step(container, 'waitContainer');
      return await raceCtx(ctx, step.exited, () => this.#ctxError(ctx, 'waitContainer', container.id));
    });
  }

  tailContainer(ctx: Context, container: Container): Promise<Readable> {
    return this.#guard(ctx, 'tailContainer', container.id, () => {
      const step = this.#step(container, 'tailContainer');
      const stop = new AbortController();
      const stream = followLogFile(step.logFile, () => step.state === 'exited', stop.signal);
      const onAbort = (): void => {
        stop.abort();
        stream.destroy(this.#ctxError(ctx, 'tailContainer', container.id));
      };
      ctx.signal.addEventListener('abort', onAbort, { once: true });
      stream.once('close', () => {
        ctx.signal.removeEventListener('abort', onAbort);
        stop.abort();
      });
      return Promise.resolve(stream);
    });
  }

  removeContainer(ctx: Context, container: Container): Promise<void> {
    return this.#guard(ctx, 'removeContainer', container.id, async () => {
      const step = this.#steps.get(container.id);
      if (!step) return;
      await this.#stop(ctx, step);
      this.#steps.delete(container.id);
    });
  }

  // ---- image -------------------------------------------------------------------------------

  createImage(ctx: Context, container: Container): Promise<void> {
    return this.#guard(ctx, 'createImage', container.id, () => Promise.resolve());
  }

  inspectImage(ctx: Context, container: Container): Promise<string> {
    return this.#guard(ctx, 'inspectImage', container.id, () =>
      Promise.resolve(
        `the host runtime runs no images: ${JSON.stringify(container.image)} is not used; ${container.name} runs on this host (${os.type()} ${os.release()}).\n`,
      ),
    );
  }

  // ---- network -----------------------------------------------------------------------------

  createNetwork(ctx: Context, build: Build): Promise<void> {
    return this.#guard(ctx, 'createNetwork', build.id, () => Promise.resolve());
  }

  inspectNetwork(ctx: Context, build: Build): Promise<string> {
    return this.#guard(ctx, 'inspectNetwork', build.id, () => Promise.resolve("the host runtime creates no network: steps use the host's network.\n"));
  }

  removeNetwork(ctx: Context, build: Build): Promise<void> {
    return this.#guard(ctx, 'removeNetwork', build.id, () => Promise.resolve());
  }

  // ---- volume ------------------------------------------------------------------------------

  createVolume(ctx: Context, build: Build): Promise<void> {
    return this.#guard(ctx, 'createVolume', build.id, async () => {
      await mkdir(this.#layout(build).workspace, { recursive: true, mode: 0o700 });
    });
  }

  inspectVolume(ctx: Context, build: Build): Promise<string> {
    return this.#guard(ctx, 'inspectVolume', build.id, () => Promise.resolve(`workspace directory: ${this.#layout(build).workspace}\n`));
  }

  removeVolume(ctx: Context, build: Build): Promise<void> {
    return this.#guard(ctx, 'removeVolume', build.id, async () => {
      // A workspace given by the operator (berth exec's current directory) is never removed.
      if (this.#config.workspaceHostPath === undefined) await rm(this.#layout(build).workspace, { recursive: true, force: true });
    });
  }

  // ---- worker ------------------------------------------------------------------------------

  reap(ctx: Context, owner: string, keep: ReadonlySet<string> = new Set()): Promise<ReapReport> {
    return this.#guard(ctx, 'reap', owner, async () => {
      const report: ReapReport = { containers: [], networks: [], volumes: [], pods: [] };
      const dir = workerDir(this.#root, owner);
      const kept = new Set([...keep].map((id) => labelValue(id)));
      const entries = await readdir(dir).catch(() => [] as string[]);
      for (const entry of entries) {
        if (kept.has(entry)) continue;
        const layout: BuildLayout = { ...buildLayout(this.#root, owner, entry), dir: path.join(dir, entry) };
        report.containers.push(...(await killLeftovers(layout, entry)));
        for (const [id, step] of this.#steps) if (step.layout.dir === layout.dir) this.#steps.delete(id);
        await rm(layout.dir, { recursive: true, force: true });
        report.volumes.push(layout.dir);
      }
      // The worker's directory itself, once empty (a kept build keeps it).
      await rmdir(dir).catch(() => undefined);
      return report;
    });
  }

  async close(): Promise<void> {
    // Steps are processes of their own (like containers of an engine): they outlive the runtime
    // object, and removeBuild or reap stops them. The worker's directory goes when no build is left
    // in it (rmdir removes only an empty one; a build still there keeps it).
    await rmdir(workerDir(this.#root, this.#config.workerId)).catch(() => undefined);
  }

  // ---- internals ---------------------------------------------------------------------------

  #layout(build: Build): BuildLayout {
    let layout = this.#layouts.get(build.id);
    if (!layout) {
      layout = buildLayout(this.#root, this.#config.workerId, build.id, this.#config.workspaceHostPath);
      this.#layouts.set(build.id, layout);
    }
    return layout;
  }

  #step(container: Container, operation: string): HostStep {
    const step = this.#steps.get(container.id);
    if (!step)
      throw new RuntimeError('NotFound', `no step ${container.name} (it was not set up, or was removed)`, {
        runtime: this.name,
        operation,
        subject: container.id,
      });
    return step;
  }

  /** SIGTERM to the step's process group, SIGKILL after the stop grace; resolves once it exited. */
  async #stop(ctx: Context, step: HostStep): Promise<void> {
    if (step.state !== 'running' || step.child?.pid === undefined) return;
    const pgid = step.child.pid;
    signalGroup(pgid, 'SIGTERM');
    const [graceCtx, cancel] = withTimeout(ctx, this.#config.stopGraceMs ?? 10_000);
    try {
      await raceCtx(graceCtx, step.exited, () => new Error('grace over'));
    } catch {
      signalGroup(pgid, 'SIGKILL');
      await raceCtx(ctx, step.exited, () => this.#ctxError(ctx, 'removeContainer', step.container.id));
    } finally {
      cancel();
    }
  }

  #ctxError(ctx: Context, operation: string, subject: string): RuntimeError {
    const code: RuntimeErrorCode = ctx.err()?.name === 'DeadlineExceeded' ? 'DeadlineExceeded' : 'Canceled';
    return new RuntimeError(code, code === 'Canceled' ? 'the context was canceled' : 'the deadline passed', {
      runtime: this.name,
      operation,
      subject,
      cause: ctx.err(),
    });
  }

  /** Runs `work` unless `ctx` is done; turns any non-RuntimeError failure into `Internal`. */
  async #guard<T>(ctx: Context, operation: string, subject: string, work: () => Promise<T>): Promise<T> {
    if (ctx.signal.aborted) throw this.#ctxError(ctx, operation, subject);
    try {
      return await work();
    } catch (error) {
      if (error instanceof RuntimeError) throw error;
      throw new RuntimeError('Internal', (error as Error).message ?? String(error), { runtime: this.name, operation, subject, cause: error });
    }
  }
}

/** Resolves with `promise`, or rejects with `onDone()` as soon as `ctx` is done. */
function raceCtx<T>(ctx: Context, promise: Promise<T>, onDone: () => Error): Promise<T> {
  if (ctx.signal.aborted) return Promise.reject(onDone());
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(onDone());
    ctx.signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        ctx.signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        ctx.signal.removeEventListener('abort', onAbort);
        reject(error instanceof Error ? error : new Error(String(error)));
      },
    );
  });
}

function signalGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch {
    // Gone already.
  }
}

/**
 * Kills the process groups a build's pid files name, each only if its leader still carries the
 * build's marker in its environment (a pid the system reused for something else is spared).
 * Returns the ids (file names) of the steps it killed.
 */
async function killLeftovers(layout: BuildLayout, buildKey: string): Promise<string[]> {
  const killed: string[] = [];
  const files = await readdir(layout.pids).catch(() => [] as string[]);
  for (const file of files.filter((f) => f.endsWith('.pid'))) {
    const pgid = Number(await readFile(path.join(layout.pids, file), 'utf8').catch(() => ''));
    if (!Number.isInteger(pgid) || pgid <= 1) continue;
    if (!(await carriesMarker(pgid, buildKey))) continue;
    signalGroup(pgid, 'SIGKILL');
    // Give the kernel a moment so a reap that follows finds nothing running.
    await sleep(background(), 20);
    killed.push(file.slice(0, -'.pid'.length));
  }
  return killed;
}

async function carriesMarker(pid: number, buildKey: string): Promise<boolean> {
  const environ = `/proc/${pid}/environ`;
  try {
    await access(environ, fsConstants.R_OK);
  } catch {
    return false;
  }
  const text = await readFile(environ, 'utf8').catch(() => '');
  return text.split('\0').includes(`${BUILD_MARKER}=${buildKey}`);
}

function isCurrentUser(user: string): boolean {
  const me = os.userInfo();
  return user === String(me.uid) || user === me.username;
}
