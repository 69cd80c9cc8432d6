/**
 * The Vela reporter: sends a build's statuses and logs to a Vela server with the build token.
 */
import { type Context } from '@berth/context';
import type { BuildReport, Reporter, StepReport, Target } from '@berth/executor';
import { type RetryOptions, type VelaClient } from './client.ts';
import { type UploadStats, WholeLogUploader, type WholeLogUploaderOptions } from './log-upload.ts';
import type { VelaBuild, VelaService, VelaStep } from './models.ts';

/** The build a reporter reports on: at least its number and its repo's org and name. */
export type ReportedBuild = VelaBuild & { number: number; repo: NonNullable<VelaBuild['repo']> & { org: string; name: string } };

/** Options of {@link VelaReporter}. */
export interface VelaReporterOptions {
  /** A client carrying the build's token. */
  client: VelaClient;
  /** The build as the queue item (or the server) gave it; the reporter PUTs it back with each status. */
  build: ReportedBuild;
  /** Tuning of the log uploads (budget, growth fraction, interval). */
  upload?: Omit<WholeLogUploaderOptions, 'upload' | 'maxBytes' | 'onError'>;
  /** Retries of status PUTs (default 5 attempts). */
  statusRetry?: RetryOptions;
  /** Where failed uploads are reported (a pino logger fits). */
  logger?: { warn(obj: object, msg: string): void };
}

const seconds = (ms: number | undefined): number | undefined => (ms === undefined ? undefined : Math.floor(ms / 1000));

/**
 * A step report as go-vela/worker would send it. A step the executor reports `skipped` (its
 * ruleset did not match the build) goes as W `internal/step/upload.go` Upload reports a step it
 * never ran: `killed`, exit code 137, started = finished. go-vela/ui renders `killed` as "step
 * was skipped" (`src/elm/Pages/Org_/Repo_/Build_.elm` viewLogs) and decodes a status it does not
 * know, such as `skipped`, as Error (`src/elm/Vela.elm` toStatus), showing "error: null".
 */
function velaStepReport(report: StepReport): StepReport {
  if (report.status !== 'skipped') return report;
  const finished = report.finished ?? Date.now();
  return { ...report, status: 'killed', exitCode: 137, started: report.started ?? finished, finished };
}

function targetKey(t: Target): string {
  return `${t.kind === 'service' ? 'service' : 'step'}:${t.number}`;
}

/**
 * A {@link Reporter} for a Vela server. Statuses become `PUT …/builds/{n}`, `…/steps/{n}` and
 * `…/services/{n}` (the init step is a step); logs are kept per step or service and uploaded
 * whole (`PUT …/logs`, base64), throttled by a {@link WholeLogUploader} so the bytes sent stay a
 * bounded multiple of the log's size; `closeLog` makes the final upload.
 *
 * Gotchas: targets numbered 0 (an init step Berth synthesized, unknown to the server) are not
 * reported. Status and final log PUTs are retried a few times (the Go worker never retries them);
 * non-final log uploads are not retried as such: the next one carries everything.
 */
export class VelaReporter implements Reporter {
  readonly #client: VelaClient;
  readonly #options: VelaReporterOptions;
  readonly #uploaders = new Map<string, WholeLogUploader>();
  readonly #finished = new Map<string, UploadStats>();
  #build: ReportedBuild;

  constructor(options: VelaReporterOptions) {
    this.#client = options.client;
    this.#options = options;
    this.#build = options.build;
  }

  /** The build as last stored by the server. */
  get build(): ReportedBuild {
    return this.#build;
  }

  async buildStatus(ctx: Context, report: BuildReport): Promise<void> {
    const body: ReportedBuild = {
      ...this.#build,
      status: report.status,
      host: report.host,
      runtime: report.runtime,
      distribution: report.distribution,
    };
    if (report.started !== undefined) body.started = seconds(report.started)!;
    if (report.finished !== undefined) body.finished = seconds(report.finished)!;
    if (report.error !== undefined) body.error = report.error;
    const stored = await this.#client.updateBuild(ctx, this.#org, this.#repo, body, { retry: this.#options.statusRetry ?? {} });
    this.#build = { ...body, ...stored, repo: { ...body.repo, ...stored?.repo }, number: body.number };
  }

  async stepStatus(ctx: Context, report: StepReport): Promise<void> {
    if (report.number <= 0) return;
    const wire = velaStepReport(report);
    const common = {
      number: wire.number,
      name: wire.name,
      image: wire.image,
      status: wire.status,
      exit_code: wire.exitCode,
      ...(wire.started === undefined ? {} : { started: seconds(wire.started) }),
      ...(wire.finished === undefined ? {} : { finished: seconds(wire.finished) }),
      ...(wire.error === undefined ? {} : { error: wire.error }),
      host: this.#build.host,
      runtime: this.#build.runtime,
      distribution: this.#build.distribution,
    };
    const opts = { retry: this.#options.statusRetry ?? {} };
    if (report.kind === 'service') {
      const service: VelaService & { number: number } = common;
      await this.#client.updateService(ctx, this.#org, this.#repo, this.#build.number, service, opts);
    } else {
      const step: VelaStep & { number: number } = { ...common, stage: report.stage ?? '' };
      await this.#client.updateStep(ctx, this.#org, this.#repo, this.#build.number, step, opts);
    }
  }

  appendLog(ctx: Context, target: Target, chunk: Uint8Array): Promise<void> {
    if (target.number <= 0) return Promise.resolve();
    const key = targetKey(target);
    let up = this.#uploaders.get(key);
    if (!up) {
      const kind = target.kind === 'service' ? 'services' : 'steps';
      up = new WholeLogUploader({
        ...this.#options.upload,
        // No cap here: the executor's cap (VELA_EXECUTOR_MAX_LOG_SIZE) already bounds the log and
        // adds its truncation markers and rolling tail; cutting again would drop exactly those.
        maxBytes: 0,
        // One attempt per upload: the uploader retries the final one itself and counts every byte.
        upload: (c, log) => this.#client.updateLog(c, this.#org, this.#repo, this.#build.number, kind, target.number, log, { retry: { attempts: 1 } }),
        onError: (e, final) =>
          this.#options.logger?.warn(
            { target: key, final, err: e instanceof Error ? e.message : String(e) },
            final ? 'final log upload failed' : 'log upload failed; the next upload carries it',
          ),
      });
      this.#uploaders.set(key, up);
    }
    up.append(ctx, chunk);
    return Promise.resolve();
  }

  async closeLog(ctx: Context, target: Target): Promise<void> {
    const key = targetKey(target);
    const up = this.#uploaders.get(key);
    if (!up) return;
    this.#uploaders.delete(key);
    try {
      await up.finish(ctx);
    } finally {
      this.#finished.set(key, up.stats());
    }
  }

  /** Upload counters per target (`step:2`, `service:1`), open and closed logs alike. */
  uploadStats(): Map<string, UploadStats> {
    const all = new Map(this.#finished);
    for (const [k, up] of this.#uploaders) all.set(k, up.stats());
    return all;
  }

  /** Drops every log still open without a final upload (the build is being abandoned). */
  abandon(): void {
    for (const up of this.#uploaders.values()) up.abandon();
    this.#uploaders.clear();
  }

  get #org(): string {
    return this.#build.repo.org;
  }

  get #repo(): string {
    return this.#build.repo.name;
  }
}
