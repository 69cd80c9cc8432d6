// The kubelet's container log rotation (kubernetes/kubernetes pkg/kubelet/logs/container_log_manager.go):
// every `containerLogMonitorInterval` (10 s) the manager lists the running containers and
// rotates each one whose current log file has reached `containerLogMaxSize` (10Mi): it renames
// the file and has the runtime reopen the path, so the records written from then on go to a new
// file. Rotated files are kept (at most `containerLogMaxFiles` - 2 besides the two newest,
// compressed) but pods/log never serves them: the kubelet reads only the current file.
//
// kube-sim keeps Docker's whole log and models a rotation as a cut: the records a container
// wrote up to the rotation's time are in rotated files; the current file holds the ones after
// the latest cut. logs.ts serves only the current file, and a follow across a rotation as the
// kubelet's ReadLogs does.

import type Docker from 'dockerode';
import { type Readable } from 'node:stream';
import { instanceLabel } from './docker-spec.ts';
import { FrameParser, criRecordBytes, splitRecord } from '../log-records.ts';

/** The kubelet's log rotation settings (KubeletConfiguration). */
export interface LogRotationPolicy {
  /** `containerLogMaxSize` in bytes: a current file this big or bigger is rotated. Default 10Mi. */
  maxSize: number;
  /** `containerLogMaxFiles`: how many files of a container's log are kept; must be more than 1. Default 5. */
  maxFiles: number;
  /** `containerLogMonitorInterval` in ms: how often running containers are checked. Default 10 000. */
  checkPeriodMs: number;
}

/** The kubelet's defaults (pkg/kubelet/apis/config/v1beta1 defaults: 10Mi, 5 files, 10 s). */
const kubeletLogRotation: LogRotationPolicy = { maxSize: 10 * 1024 * 1024, maxFiles: 5, checkPeriodMs: 10_000 };

/**
 * Checks a policy as NewContainerLogManager does ("invalid MaxFiles %d, must be > 1"); a
 * negative maxSize disables rotation there (NewStubContainerLogManager): null here.
 */
export function logRotationPolicy(options: Partial<LogRotationPolicy> | false | undefined): LogRotationPolicy | null {
  if (options === false) return null;
  const policy = { ...kubeletLogRotation, ...options };
  if (policy.maxSize < 0) return null;
  if (!Number.isInteger(policy.maxFiles) || policy.maxFiles <= 1)
    throw new Error(`[kube-sim] logRotation.maxFiles: invalid MaxFiles ${policy.maxFiles}, must be > 1`);
  if (!(policy.checkPeriodMs > 0)) throw new Error(`[kube-sim] logRotation.checkPeriodMs must be more than 0 (got ${policy.checkPeriodMs})`);
  return policy;
}

/** Told of a rotation: the timestamp of the last record the rotated file holds; later records are in the new file. */
type RotationListener = (cut: string) => void;

/** What the log rotation did so far (for tests and benchmarks). */
export interface LogRotationStats {
  /** Logs rotated. */
  rotations: number;
  /** Follows that ended at a rotated file's end because the container had exited (what they missed is in the current file). */
  followsEndedAtRotation: number;
  /** Follows that went on with the newest file past a file rotated while they were behind (that file's records were never sent). */
  filesSkipped: number;
  /** Records the size checks counted: each check counts only the records written since the last one. */
  recordsMeasured: number;
}

/** Docker's `since` for the records at or after the RFC 3339 timestamp `ts` (nanoseconds kept: the engine takes "seconds.nanoseconds"). */
function dockerSince(ts: string): string {
  const m = /^(.*T\d\d:\d\d:\d\d)(?:\.(\d+))?Z$/.exec(ts);
  if (!m) return String(Math.max(0, Math.floor(Date.parse(ts) / 1000) - 1));
  return `${Math.floor(Date.parse(`${m[1]}Z`) / 1000)}.${(m[2] ?? '').padEnd(9, '0')}`;
}

/** Rotates the logs of the sim's running containers; tells followers of a container when its log rotates. */
export class ContainerLogManager {
  readonly #docker: Docker;
  readonly #instance: string;
  readonly #policy: LogRotationPolicy;
  readonly #running: (dockerId: string) => boolean;
  /** Docker id → timestamp of the latest rotation: the current file holds the records after it. */
  readonly #cuts = new Map<string, string>();
  /**
   * Docker id → the size of its current file as last measured, and the timestamp of the last
   * record counted: each check reads only the records written since. The kubelet stats the file
   * (container_log_manager.go processContainer: `os.Stat(pattern)`, `info.Size() < MaxSize`);
   * reading Docker's whole log at every check made a check of a 50 MiB log take seconds of this
   * process's CPU, and under load a step's log was not measured before the step exited.
   */
  readonly #measured = new Map<string, { size: number; lastRecord: string }>();
  readonly #listeners = new Map<string, Set<RotationListener>>();
  #timer: NodeJS.Timeout | undefined;
  #stopped = false;
  readonly #stats: LogRotationStats = { rotations: 0, followsEndedAtRotation: 0, filesSkipped: 0, recordsMeasured: 0 };

  /** `running` tells whether a Docker container is still a running container of a pod. */
  constructor(docker: Docker, instance: string, policy: LogRotationPolicy, running: (dockerId: string) => boolean) {
    this.#running = running;
    this.#docker = docker;
    this.#instance = instance;
    this.#policy = policy;
  }

  /** Starts the rotation loop: wait.Forever(rotateLogs, monitoringPeriod), the next check a period after the last ended. */
  start(): void {
    const loop = (): void => {
      this.#timer = setTimeout(() => {
        void this.#rotateLogs()
          .catch((err: unknown) => console.error('[kube-sim] log rotation failed:', err))
          .finally(() => {
            if (!this.#stopped) loop();
          });
      }, this.#policy.checkPeriodMs);
    };
    loop();
  }

  /** Stops the loop. */
  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
  }

  /** A copy of the counts so far. */
  stats(): LogRotationStats {
    return { ...this.#stats };
  }

  /** A follow ended at a rotated file's end (the container had exited). */
  noteFollowEnded(): void {
    this.#stats.followsEndedAtRotation++;
  }

  /** A follow went on with the newest file, past one rotated while it was behind. */
  noteFileSkipped(): void {
    this.#stats.filesSkipped++;
  }

  /** Timestamp after which a container's records are in its current log file; undefined when it never rotated. */
  currentFileStart(dockerId: string): string | undefined {
    return this.#cuts.get(dockerId);
  }

  /** Calls `listener` with the rotation's time whenever the container's log rotates; returns the unsubscribe function. */
  onRotate(dockerId: string, listener: RotationListener): () => void {
    let set = this.#listeners.get(dockerId);
    if (!set) this.#listeners.set(dockerId, (set = new Set()));
    set.add(listener);
    return () => {
      set.delete(listener);
      if (set.size === 0) this.#listeners.delete(dockerId);
    };
  }

  /** rotateLogs + processContainer: only running containers ("Non-running containers won't generate new output"), each rotated once it reached MaxSize. */
  async #rotateLogs(): Promise<void> {
    const filters = JSON.stringify({ label: [`${instanceLabel}=${this.#instance}`], status: ['running'] });
    const containers = await this.#docker.listContainers({ filters });
    const running = new Set(containers.map((c) => c.Id));
    for (const id of this.#measured.keys()) if (!running.has(id)) this.#measured.delete(id);
    for (const c of containers) {
      if (this.#stopped) return;
      // The sandbox (pause) container is no CRI container and has no log file.
      if (c.Labels['berth.kube-sim/container'] === 'POD') continue;
      const file = await this.#currentFile(c.Id).catch(() => ({ size: 0, lastRecord: undefined }));
      // processContainer: `if info.Size() < c.policy.MaxSize { return }`, else rotateLog.
      if (file.size >= this.#policy.maxSize && file.lastRecord !== undefined) this.#rotate(c.Id, file.lastRecord);
    }
  }

  /** Size of the container's current log file (its records since the latest rotation, in the CRI format) and its last record's timestamp. */
  async #currentFile(dockerId: string): Promise<{ size: number; lastRecord: string | undefined }> {
    const measured = this.#measured.get(dockerId);
    // Records up to `after` are counted already (or in a rotated file).
    const after = measured?.lastRecord ?? this.#cuts.get(dockerId);
    const since = after === undefined ? undefined : dockerSince(after);
    const raw = (await this.#docker
      .getContainer(dockerId)
      // dockerode types `since` as a number; the engine takes "seconds.nanoseconds" (timetypes.ParseTimestamps).
      .logs({ stdout: true, stderr: true, timestamps: true, follow: false, ...(since === undefined ? {} : { since: since as unknown as number }) })) as unknown;
    const parser = new FrameParser();
    let size = measured?.size ?? 0;
    let lastRecord = measured?.lastRecord;
    const add = (chunk: Buffer): void => {
      for (const payload of parser.push(chunk)) {
        const { ts, content } = splitRecord(payload);
        if (after !== undefined && ts <= after) continue;
        size += criRecordBytes(content);
        lastRecord = ts;
        this.#stats.recordsMeasured++;
      }
    };
    if (Buffer.isBuffer(raw)) add(raw);
    else if (typeof raw === 'string') add(Buffer.from(raw, 'latin1'));
    else for await (const chunk of raw as Readable) add(chunk as Buffer);
    if (lastRecord !== undefined) this.#measured.set(dockerId, { size, lastRecord });
    return { size, lastRecord };
  }

  /**
   * rotateLatestLog: renames the current file to `<log>.<timestamp>` and has the runtime reopen
   * the path (ReopenContainerLog), which creates a new, empty current file: the file that was
   * measured (up to `lastRecord`) is rotated, the records after it go to the new one. When the
   * container has stopped meanwhile, ReopenContainerLog fails and the kubelet renames the file
   * back: no rotation. (rotateLog first removes excess files and compresses older ones:
   * kube-sim serves no rotated file, so it needs no more than the cut.)
   */
  #rotate(dockerId: string, lastRecord: string): void {
    if (!this.#running(dockerId)) return;
    this.#cuts.set(dockerId, lastRecord);
    this.#measured.set(dockerId, { size: 0, lastRecord });
    this.#stats.rotations++;
    for (const listener of this.#listeners.get(dockerId) ?? []) listener(lastRecord);
  }
}
