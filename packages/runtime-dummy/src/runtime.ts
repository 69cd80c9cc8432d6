import { errOf, parseGoDuration, sleep, type Context } from '@berth/context';
import { parseImageReference, type Build, type Container } from '@berth/pipeline';
import {
  isPrivilegedImage,
  isRuntimeError,
  labelValue,
  MAX_OUTPUT_FILE_BYTES,
  OUTPUTS_PATH,
  RuntimeError,
  type ContainerExit,
  type ContainerStatus,
  type ReapReport,
  type Runtime,
  type RuntimeConfig,
  type RuntimeErrorCode,
} from '@berth/runtime';
import path from 'node:path';
import type { Readable } from 'node:stream';
import type { DummyContainer, DummyEngine } from './engine.ts';
import { tailLog } from './log.ts';
import { ContainerFs, MemoryFs } from './shell/fs.ts';
import { EMPTY_INPUT, type Output } from './shell/io.ts';
import { shellCommands } from './shell/builtins/index.ts';
import { Killed, Shell, type ShellHost } from './shell/shell.ts';

/** Options of {@link dummyRuntime}, fixed for every runtime its descriptor creates. */
export interface DummyRuntimeOptions {
  /** The runtime's name in errors and `Runtime.name`. Default `dummy`. */
  name?: string;
  /**
   * Images present on the engine before anything is pulled. Default: `BERTH_BUSYBOX_IMAGE`
   * (`berth/busybox:1.35`) and `BERTH_PAUSE_IMAGE` (`berth/pause:1`).
   */
  images?: Iterable<string>;
  /**
   * Whether the (imaginary) registry has an image, for pulls (`not_present` on a missing image,
   * `always`, `on_start`, `createImage`). Default: every valid reference can be pulled.
   * A container's `DUMMY_PULL_FAIL` env makes its pull fail whatever this says.
   */
  registry?: (normalizedReference: string) => boolean;
  /** Delay of every runtime call, in ms (honouring ctx). Default 0. */
  latencyMs?: number;
  /** The engine holding containers, networks and volumes. Default: one shared per process. */
  engine?: DummyEngine;
}

const DEFAULT_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';
const CAPS_DEFAULT = '00000000a80425fb';
const CAPS_PRIVILEGED = '000001ffffffffff';

/**
 * The dummy runtime: containers are in-memory processes of a tiny shell, behaving as their
 * environment says (see the package README for the `DUMMY_*` variables).
 */
export class DummyRuntime implements Runtime {
  readonly name: string;
  /** As Docker's: each container is created on its own, at any time until the build is removed (contract 1.3). */
  readonly setupWhileRunning = true;
  readonly #config: RuntimeConfig;
  readonly #options: DummyRuntimeOptions;
  readonly #engine: DummyEngine;
  #closed = false;

  constructor(config: RuntimeConfig, options: DummyRuntimeOptions, engine: DummyEngine) {
    this.name = options.name ?? 'dummy';
    this.#config = config;
    this.#options = options;
    this.#engine = engine;
  }

  get #workspacePath(): string {
    return this.#config.workspacePath ?? '/vela';
  }

  #error(code: RuntimeErrorCode, detail: string, operation: string, subject?: string, cause?: unknown): RuntimeError {
    return new RuntimeError(code, detail, {
      runtime: this.name,
      operation,
      ...(subject === undefined ? {} : { subject }),
      ...(cause === undefined ? {} : { cause }),
    });
  }

  #ctxError(ctx: Context, operation: string, subject?: string): RuntimeError {
    const err = errOf(ctx);
    const code = err.name === 'DeadlineExceeded' ? 'DeadlineExceeded' : 'Canceled';
    return this.#error(code, code === 'Canceled' ? 'the context was canceled' : 'the deadline passed', operation, subject, err);
  }

  /** Every call starts here: a done ctx or a closed runtime rejects at once; then the configured latency. */
  async #enter(ctx: Context, operation: string, subject?: string): Promise<void> {
    if (ctx.signal.aborted) throw this.#ctxError(ctx, operation, subject);
    if (this.#closed) throw this.#error('Unavailable', 'the runtime was closed', operation, subject);
    const latency = this.#options.latencyMs ?? 0;
    if (latency > 0) {
      try {
        await sleep(ctx, latency);
      } catch {
        throw this.#ctxError(ctx, operation, subject);
      }
    }
  }

  #owned(container: DummyContainer): boolean {
    return container.workerId === this.#config.workerId;
  }

  #find(container: Container, operation: string): DummyContainer {
    const found = this.#engine.containers.get(container.id);
    if (!found) throw this.#error('NotFound', 'no such container', operation, container.id);
    return found;
  }

  // ---- build --------------------------------------------------------------------------------

  async inspectBuild(ctx: Context, build: Build): Promise<string> {
    await this.#enter(ctx, 'inspectBuild', build.id);
    const { containers } = this.#engine.owned(this.#config.workerId, build.id);
    return `> Inspecting build ${build.id} on the dummy runtime: ${containers.length} container(s)\n`;
  }

  async setupBuild(ctx: Context, build: Build): Promise<void> {
    await this.#enter(ctx, 'setupBuild', build.id);
  }

  async assembleBuild(ctx: Context, build: Build): Promise<void> {
    await this.#enter(ctx, 'assembleBuild', build.id);
  }

  async removeBuild(ctx: Context, build: Build): Promise<void> {
    await this.#enter(ctx, 'removeBuild', build.id);
    const owned = this.#engine.owned(this.#config.workerId, build.id);
    await this.#bounded(ctx, 'removeBuild', build.id, Promise.all(owned.containers.map((c) => this.#engine.destroyContainer(c))));
    for (const network of owned.networks) this.#engine.networks.delete(network.name);
    for (const volume of owned.volumes) this.#engine.volumes.delete(volume.name);
  }

  /** Awaits `work`, rejecting promptly when ctx ends first (the work goes on in the engine). */
  async #bounded<T>(ctx: Context, operation: string, subject: string, work: Promise<T>): Promise<T> {
    const outcome = await Promise.race([work.then((value) => ({ value })), ctx.done().then(() => undefined)]);
    if (outcome === undefined) throw this.#ctxError(ctx, operation, subject);
    return outcome.value;
  }

  // ---- container ----------------------------------------------------------------------------

  async setupContainer(ctx: Context, container: Container, build: Build): Promise<void> {
    await this.#enter(ctx, 'setupContainer', container.id);
    const image = this.#reference(container, 'setupContainer');
    if (this.#engine.containers.has(container.id)) {
      throw this.#error('AlreadyExists', 'a container of that id exists already', 'setupContainer', container.id);
    }
    const present = this.#engine.images.has(image);
    if (container.pull === 'never' && !present) {
      throw this.#error('ImageNotFound', `image "${container.image}" not found locally and pull policy is "never"`, 'setupContainer', container.id);
    }
    if (container.pull === 'always' || (container.pull === 'not_present' && !present)) {
      await this.#pull(ctx, container, image, build.id, 'setupContainer');
    }
    this.#engine.createContainer(container, image, { workerId: this.#config.workerId, buildId: build.id });
  }

  async runContainer(ctx: Context, container: Container, build: Build): Promise<void> {
    await this.#enter(ctx, 'runContainer', container.id);
    const record = this.#find(container, 'runContainer');
    if (record.state !== 'created') return;
    if (record.held !== undefined) return this.#release(record);
    const start = await this.#check(ctx, container, record, build, 'runContainer');
    record.state = 'running';
    void this.#run(record, start.argv, start.identity);
  }

  /**
   * The held start (contract 1.4): a shell script (`/bin/sh -c` and one command) is set up and
   * checked as a start would (image, DUMMY_START_FAIL, user), its command begun only by
   * releaseContainer; `false` for any other container, nothing created.
   */
  async holdContainer(ctx: Context, container: Container, build: Build): Promise<boolean> {
    const [shell, flag, ...rest] = container.entrypoint;
    if (shell !== '/bin/sh' || flag !== '-c' || rest.length > 0 || container.commands.length !== 1 || container.pull === 'on_start') return false;
    if (this.#engine.containers.has(container.id)) return false;
    await this.setupContainer(ctx, container, build);
    const record = this.#find(container, 'holdContainer');
    record.held = await this.#check(ctx, container, record, build, 'holdContainer');
    return true;
  }

  /** Begins the held container's command (contract 1.4). */
  async releaseContainer(ctx: Context, container: Container): Promise<void> {
    await this.#enter(ctx, 'releaseContainer', container.id);
    const record = this.#engine.containers.get(container.id);
    if (record?.held === undefined)
      throw this.#error('NotFound', 'the container is not held: hold it with holdContainer first', 'releaseContainer', container.id);
    if (record.state !== 'created') {
      throw this.#error('ContainerFailed', 'the held container ended before it was released, so it ran nothing', 'releaseContainer', container.id);
    }
    this.#release(record);
  }

  #release(record: DummyContainer): void {
    const start = record.held;
    record.held = undefined;
    if (start === undefined) return;
    record.state = 'running';
    void this.#run(record, start.argv, start.identity);
  }

  /** What a start checks (pull with `on_start`, image, DUMMY_START_FAIL, program, user): what to run, or the failure, recorded on the container. */
  async #check(
    ctx: Context,
    container: Container,
    record: DummyContainer,
    build: Build,
    operation: string,
  ): Promise<{ argv: string[]; identity: { uid: number; gid: number } }> {
    if (container.pull === 'on_start') {
      try {
        await this.#pull(ctx, container, record.image, build.id, operation);
      } catch (error) {
        if (isRuntimeError(error, 'ImagePullFailed', 'ImageNotFound')) this.#fail(record, error, 'ErrImagePull');
        throw error;
      }
    }
    if (!this.#engine.images.has(record.image)) {
      const error = this.#error('ImageNotFound', `image "${container.image}" is not present`, operation, container.id);
      this.#fail(record, error, 'ImageNotFound');
      throw error;
    }
    const env = container.environment;
    if (env.DUMMY_START_FAIL !== undefined) {
      const error = this.#error('ContainerFailed', `the container could not start: ${env.DUMMY_START_FAIL || 'DUMMY_START_FAIL'}`, operation, container.id);
      this.#fail(record, error, 'StartFailed', 128);
      throw error;
    }
    const argv = [...container.entrypoint, ...container.commands];
    const program = argv[0]?.split('/').at(-1);
    if (program !== undefined && !shellCommands().includes(program)) {
      const error = this.#error('ContainerFailed', `exec: "${argv[0]}": executable file not found in $PATH`, operation, container.id);
      this.#fail(record, error, 'ContainerCannotRun', 127);
      throw error;
    }
    const identity = this.#user(container.user);
    if (identity === undefined) {
      const error = this.#error('ContainerFailed', `unable to find user ${container.user}: no matching entries in passwd file`, operation, container.id);
      this.#fail(record, error, 'ContainerCannotRun', 128);
      throw error;
    }
    return { argv, identity };
  }

  #fail(record: DummyContainer, error: RuntimeError, reason: string, exitCode?: number): void {
    record.failure = error;
    record.reason = reason;
    record.state = 'exited';
    if (exitCode !== undefined) record.exitCode = exitCode;
    record.log.end();
    record.markExited();
  }

  #user(user: string): { uid: number; gid: number } | undefined {
    if (user === '' || user === 'root') return { uid: 0, gid: 0 };
    if (user === 'nobody') return { uid: 65534, gid: 65534 };
    const match = /^(\d+)(?::(\d+))?$/.exec(user);
    if (!match) return undefined;
    return { uid: Number(match[1]), gid: Number(match[2] ?? 0) };
  }

  /** The container's life: DUMMY_OUTPUT, DUMMY_SLEEP, its command line, DUMMY_EXIT_CODE. */
  async #run(record: DummyContainer, argv: string[], identity: { uid: number; gid: number }): Promise<void> {
    const spec = record.spec;
    const env = spec.environment;
    const privileged = spec.privileged && isPrivilegedImage(spec.image, this.#config.privilegedImages);
    let pid = 0;
    const engine = this.#engine;
    const workspace = engine.volumes.get(record.buildId)?.fs;
    const outputs = engine.volumes.get(outputsVolume(record.buildId))?.fs;
    const fs = new ContainerFs(
      record.fs,
      workspace,
      this.#workspacePath,
      (file) => {
        if (file === '/proc/self/status' || file === '/proc/1/status') {
          const caps = privileged ? CAPS_PRIVILEGED : CAPS_DEFAULT;
          return Buffer.from(
            `Name:\tsh\nState:\tR (running)\nPid:\t${pid}\nUid:\t${identity.uid}\t${identity.uid}\t${identity.uid}\t${identity.uid}\n` +
              `Gid:\t${identity.gid}\t${identity.gid}\t${identity.gid}\t${identity.gid}\n` +
              `CapInh:\t0000000000000000\nCapPrm:\t${identity.uid === 0 ? caps : '0000000000000000'}\nCapEff:\t${identity.uid === 0 ? caps : '0000000000000000'}\n` +
              `CapBnd:\t${caps}\nCapAmb:\t0000000000000000\nNoNewPrivs:\t0\n`,
          );
        }
        if (file === '/etc/hostname') return Buffer.from(`${record.name}\n`);
        return undefined;
      },
      outputs === undefined ? undefined : { path: OUTPUTS_PATH, fs: outputs },
    );
    const cwd = spec.directory || '/';
    fs.mkdir(cwd);
    const host: ShellHost = {
      signal: record.kill.signal,
      fs,
      uid: identity.uid,
      gid: identity.gid,
      hostname: record.name,
      nextPid: () => ++pid,
      killContainer: () => record.kill.abort(),
      connect: (name, port) => {
        const target =
          name === 'localhost' || name === '127.0.0.1'
            ? record
            : [...engine.containers.values()].find((c) => c.buildId === record.buildId && c.workerId === record.workerId && (c.name === name || c.id === name));
        if (!target || target.state !== 'running') return 'unknown-host';
        return target.listeners.get(port) ?? 'refused';
      },
      listen: (port, listener) => {
        record.listeners.set(port, listener);
        return () => {
          if (record.listeners.get(port) === listener) record.listeners.delete(port);
        };
      },
    };
    const log: Output = {
      write: (data) => {
        if (record.kill.signal.aborted) return Promise.reject(new Killed(9));
        record.log.append(typeof data === 'string' ? Buffer.from(data) : data);
        return Promise.resolve(true);
      },
    };
    const vars: Record<string, string> = { PATH: DEFAULT_PATH, HOSTNAME: record.name, HOME: identity.uid === 0 ? '/root' : '/', ...env };
    const shell = new Shell(host, { env: vars, cwd });
    let status: number;
    try {
      if (env.DUMMY_OUTPUT !== undefined) record.log.append(env.DUMMY_OUTPUT);
      // A Go duration, as Woodpecker's dummy backend reads SLEEP (time.ParseDuration).
      const pause = env.DUMMY_SLEEP === undefined ? undefined : parseGoDuration(env.DUMMY_SLEEP.trim());
      if (env.DUMMY_SLEEP !== undefined && (pause === undefined || pause < 0)) {
        record.log.append(`[dummy] DUMMY_SLEEP ${JSON.stringify(env.DUMMY_SLEEP)} is not a Go duration: write e.g. 500ms, 2s or 1m30s\n`);
        status = 2;
      } else {
        if (pause !== undefined) await shell.sleep(pause);
        status = argv.length > 0 ? await shell.runArgv(argv, { stdin: EMPTY_INPUT, stdout: log, stderr: log }) : 0;
        if (env.DUMMY_EXIT_CODE !== undefined) status = Number(env.DUMMY_EXIT_CODE) & 255;
      }
    } catch (error) {
      if (error instanceof Killed) {
        status = 128 + error.signalNumber;
      } else {
        record.log.append(`[dummy] internal error: ${error instanceof Error ? error.message : String(error)}\n`);
        status = 255;
      }
    }
    record.listeners.clear();
    record.exitCode = status;
    record.reason = status === 137 ? 'Killed' : status === 0 ? 'Completed' : 'Error';
    record.state = 'exited';
    record.log.end();
    record.markExited();
  }

  async inspectContainer(ctx: Context, container: Container): Promise<ContainerStatus> {
    await this.#enter(ctx, 'inspectContainer', container.id);
    const record = this.#find(container, 'inspectContainer');
    const status: ContainerStatus = { state: record.held === undefined ? record.state : 'running' };
    if (record.exitCode !== undefined && record.state === 'exited') status.exitCode = record.exitCode;
    if (record.reason !== undefined) status.reason = record.reason;
    return status;
  }

  async waitContainer(ctx: Context, container: Container): Promise<ContainerExit> {
    await this.#enter(ctx, 'waitContainer', container.id);
    const record = this.#find(container, 'waitContainer');
    await this.#bounded(ctx, 'waitContainer', container.id, record.exited);
    if (record.failure) throw record.failure;
    const exit: ContainerExit = { exitCode: record.exitCode ?? 0 };
    if (record.reason !== undefined) exit.reason = record.reason;
    return exit;
  }

  async tailContainer(ctx: Context, container: Container): Promise<Readable> {
    await this.#enter(ctx, 'tailContainer', container.id);
    const record = this.#find(container, 'tailContainer');
    return tailLog(ctx, record.log, () => this.#ctxError(ctx, 'tailContainer', container.id));
  }

  async removeContainer(ctx: Context, container: Container): Promise<void> {
    await this.#enter(ctx, 'removeContainer', container.id);
    const record = this.#engine.containers.get(container.id);
    if (!record) return;
    await this.#bounded(ctx, 'removeContainer', container.id, this.#engine.destroyContainer(record));
  }

  // ---- image --------------------------------------------------------------------------------

  /** The normalised reference of the container's image, or InvalidConfig. */
  #reference(container: Container, operation: string): string {
    const parsed = parseImageReference(container.image);
    if (!parsed.ok) throw this.#error('InvalidConfig', `invalid image reference "${container.image}": ${parsed.error}`, operation, container.id);
    return parsed.reference.normalized;
  }

  #pull(ctx: Context, container: Container, image: string, buildId: string, operation: string): Promise<void> {
    return new Promise((resolve) => {
      this.#pullNow(ctx, container, image, buildId, operation);
      resolve();
    });
  }

  /** The imaginary pull: instant, failing as `DUMMY_PULL_FAIL` or the registry option say. */
  #pullNow(ctx: Context, container: Container, image: string, buildId: string, operation: string): void {
    const report = (status: string): void => this.#config.onEvent?.({ type: 'pull', buildId, containerId: container.id, image: container.image, status });
    report(`Pulling ${container.image}`);
    const reason = container.environment.DUMMY_PULL_FAIL;
    if (reason !== undefined)
      throw this.#error('ImagePullFailed', `pulling "${container.image}" failed: ${reason || 'DUMMY_PULL_FAIL'}`, operation, container.id);
    const registry = this.#options.registry ?? (() => true);
    if (!registry(image)) throw this.#error('ImageNotFound', `image "${container.image}" not found in the registry`, operation, container.id);
    if (ctx.signal.aborted) throw this.#ctxError(ctx, operation, container.id);
    this.#engine.images.add(image);
    report('Pull complete');
  }

  async createImage(ctx: Context, container: Container): Promise<void> {
    await this.#enter(ctx, 'createImage', container.id);
    const image = this.#reference(container, 'createImage');
    await this.#pull(ctx, container, image, this.#engine.containers.get(container.id)?.buildId ?? '', 'createImage');
  }

  async inspectImage(ctx: Context, container: Container): Promise<string> {
    await this.#enter(ctx, 'inspectImage', container.id);
    const image = this.#reference(container, 'inspectImage');
    if (!this.#engine.images.has(image)) throw this.#error('ImageNotFound', `image "${container.image}" is not present`, 'inspectImage', container.id);
    return `${image} (dummy image)\n`;
  }

  // ---- network and volume -------------------------------------------------------------------

  async createNetwork(ctx: Context, build: Build): Promise<void> {
    await this.#enter(ctx, 'createNetwork', build.id);
    if (!this.#engine.networks.has(build.id)) this.#engine.networks.set(build.id, { name: build.id, workerId: this.#config.workerId, buildId: build.id });
  }

  async inspectNetwork(ctx: Context, build: Build): Promise<string> {
    await this.#enter(ctx, 'inspectNetwork', build.id);
    if (!this.#engine.networks.has(build.id)) throw this.#error('NotFound', 'no such network', 'inspectNetwork', build.id);
    return `network ${build.id} (dummy bridge)\n`;
  }

  async removeNetwork(ctx: Context, build: Build): Promise<void> {
    await this.#enter(ctx, 'removeNetwork', build.id);
    this.#engine.networks.delete(build.id);
  }

  async createVolume(ctx: Context, build: Build): Promise<void> {
    await this.#enter(ctx, 'createVolume', build.id);
    if (!this.#engine.volumes.has(build.id)) {
      const fs = new MemoryFs();
      fs.mkdir(this.#workspacePath);
      this.#engine.volumes.set(build.id, { name: build.id, workerId: this.#config.workerId, buildId: build.id, fs });
    }
  }

  async inspectVolume(ctx: Context, build: Build): Promise<string> {
    await this.#enter(ctx, 'inspectVolume', build.id);
    const volume = this.#engine.volumes.get(build.id);
    if (!volume) throw this.#error('NotFound', 'no such volume', 'inspectVolume', build.id);
    return `volume ${build.id} mounted at ${this.#workspacePath}: ${volume.fs.files.size} file(s)\n`;
  }

  async removeVolume(ctx: Context, build: Build): Promise<void> {
    await this.#enter(ctx, 'removeVolume', build.id);
    this.#engine.volumes.delete(build.id);
    this.#engine.volumes.delete(outputsVolume(build.id));
  }

  // ---- outputs ------------------------------------------------------------------------------

  /** The outputs directory: an in-memory volume of its own, mounted at `/vela/outputs` in the build's containers. */
  async setupOutputs(ctx: Context, build: Build): Promise<void> {
    await this.#enter(ctx, 'setupOutputs', build.id);
    const name = outputsVolume(build.id);
    if (!this.#engine.volumes.has(name)) {
      const fs = new MemoryFs();
      fs.mkdir(OUTPUTS_PATH);
      this.#engine.volumes.set(name, { name, workerId: this.#config.workerId, buildId: build.id, fs });
    }
  }

  async readOutput(ctx: Context, build: Build, container: Container, name: string): Promise<Uint8Array | undefined> {
    await this.#enter(ctx, 'readOutput', container.id);
    this.#find(container, 'readOutput');
    const volume = this.#engine.volumes.get(outputsVolume(build.id));
    if (!volume) throw this.#error('NotFound', 'the build has no outputs directory (setupOutputs was not called)', 'readOutput', container.id);
    const data = volume.fs.read(path.posix.join(OUTPUTS_PATH, name));
    if (data !== undefined && data.length > MAX_OUTPUT_FILE_BYTES) {
      throw this.#error(
        'InvalidConfig',
        `${OUTPUTS_PATH}/${name} has ${data.length} bytes, more than the ${MAX_OUTPUT_FILE_BYTES} outputs may have`,
        'readOutput',
        container.id,
      );
    }
    return data === undefined ? undefined : new Uint8Array(data);
  }

  // ---- worker -------------------------------------------------------------------------------

  async reap(ctx: Context, owner: string, keep: ReadonlySet<string> = new Set()): Promise<ReapReport> {
    await this.#enter(ctx, 'reap', owner);
    const kept = (buildId: string): boolean => keep.has(buildId) || keep.has(labelValue(buildId));
    const owned = this.#engine.owned(owner);
    const report: ReapReport = { containers: [], networks: [], volumes: [], pods: [] };
    for (const container of owned.containers) {
      if (kept(container.buildId)) continue;
      await this.#bounded(ctx, 'reap', owner, this.#engine.destroyContainer(container));
      report.containers.push(container.id);
    }
    for (const network of owned.networks) {
      if (kept(network.buildId)) continue;
      this.#engine.networks.delete(network.name);
      report.networks.push(network.name);
    }
    for (const volume of owned.volumes) {
      if (kept(volume.buildId)) continue;
      this.#engine.volumes.delete(volume.name);
      report.volumes.push(volume.name);
    }
    return report;
  }

  close(): Promise<void> {
    this.#closed = true;
    return Promise.resolve();
  }

  /** True when `container` belongs to this runtime's worker (for tests). */
  owns(container: Container): boolean {
    const record = this.#engine.containers.get(container.id);
    return record !== undefined && this.#owned(record);
  }
}

/** The engine's name of a build's outputs volume. */
function outputsVolume(buildId: string): string {
  return `${buildId}#outputs`;
}
