/**
 * A Reporter that prints a build for a person at a terminal (`berth exec`).
 */
import { once } from 'node:events';
import type { Writable } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';
import type { Context } from '@berth/context';
import type { Build } from '@berth/pipeline';
import type { RuntimeEvent } from '@berth/runtime';
import { type BuildReport, formatBytes, type Reporter, type Status, type StepReport, type Target } from '@berth/executor';

/** Settings of {@link ConsoleReporter}. */
export interface ConsoleReporterOptions {
  /** The build about to run: its container names size the name column from the first line. */
  build?: Build;
  /** Width of the name column; by default the longest name (at most 24). */
  nameWidth?: number;
  /**
   * Colours on or off. By default on only when the stream is a TTY (`isTTY`) and `NO_COLOR` is
   * unset or empty in `env`.
   */
  color?: boolean;
  /** Where NO_COLOR is read. Default `process.env`. */
  env?: Record<string, string | undefined>;
  /** Print pull progress lines. Default true. */
  pullProgress?: boolean;
}

const ESC = '\u001b[';
const RESET = `${ESC}0m`;
const PALETTE = ['36', '35', '34', '33', '32', '96', '95', '94'];
const STATUS_COLOR: Record<Status, string> = {
  pending: '90',
  running: '36',
  success: '32',
  failure: '31',
  error: '31',
  canceled: '33',
  killed: '33',
  skipped: '90',
};
const STATUS_MARK: Record<Status, string> = {
  pending: '·',
  running: '▶',
  success: '✓',
  failure: '✗',
  error: '✗',
  canceled: '⊘',
  killed: '⊘',
  skipped: '–',
};
/** A partial line longer than this is printed as it is. */
const MAX_PARTIAL = 64 * 1024;

function duration(ms: number): string {
  if (ms < 1000) return `${Math.max(0, Math.round(ms))}ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)}s`;
  const s = Math.round(ms / 1000);
  return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
}

interface TargetState {
  color: string;
  decoder: StringDecoder;
  partial: string;
  lastPull: string;
  /** The target started and its log is not closed yet: its result line waits for the log's end. */
  logOpen: boolean;
  /** The result line, held until the log is closed so it follows the step's last log line. */
  pendingResult?: string;
}

/**
 * Prints live log lines prefixed by the step's name (padded, coloured per step), a header when a
 * step starts, its status and duration when it ends, pull progress, and a summary table (step,
 * status, duration, exit code) when the build ends.
 *
 * Gotcha: it honours the stream's backpressure (`appendLog` waits for `drain`), so a slow terminal
 * slows the reading of logs, never memory.
 */
export class ConsoleReporter implements Reporter {
  readonly #out: Writable;
  readonly #color: boolean;
  readonly #pullProgress: boolean;
  #width: number;
  readonly #fixedWidth: boolean;
  readonly #targets = new Map<string, TargetState>();
  readonly #steps = new Map<string, StepReport>();

  constructor(out: Writable, options: ConsoleReporterOptions = {}) {
    this.#out = out;
    const env = options.env ?? process.env;
    const noColor = env['NO_COLOR'] !== undefined && env['NO_COLOR'] !== '';
    this.#color = options.color ?? ((out as Writable & { isTTY?: boolean }).isTTY === true && !noColor);
    this.#pullProgress = options.pullProgress ?? true;
    this.#fixedWidth = options.nameWidth !== undefined;
    let width = options.nameWidth ?? 4;
    if (options.nameWidth === undefined && options.build !== undefined) {
      const b = options.build;
      for (const c of [...b.services, ...b.steps, ...b.stages.flatMap((s) => s.steps)]) width = Math.max(width, c.name.length);
    }
    this.#width = Math.min(width, options.nameWidth ?? 24);
  }

  /** True when this reporter prints colours. */
  get colored(): boolean {
    return this.#color;
  }

  async buildStatus(ctx: Context, build: BuildReport): Promise<void> {
    if (build.status === 'running') {
      await this.#write(ctx, `${this.#paint('1', `build ${build.id}`)} on ${build.runtime} (${build.host})\n`);
      return;
    }
    // Results still waiting for their log's end (a stream that never closed) come before the summary.
    for (const state of this.#targets.values()) await this.#releaseResult(ctx, state);
    await this.#write(ctx, this.#summary(build));
  }

  async stepStatus(ctx: Context, step: StepReport): Promise<void> {
    const previous = this.#steps.get(step.id);
    this.#steps.set(step.id, step);
    const name = this.#name(step);
    if (step.status === 'running') {
      if (previous?.status === 'running') return;
      this.#state(step).logOpen = true;
      const what = step.kind === 'service' ? 'service' : step.detached ? 'detached step' : step.kind === 'init' ? 'init' : 'step';
      const stage = step.stage === undefined ? '' : ` [stage ${step.stage}]`;
      await this.#write(
        ctx,
        `${name} ${this.#paint(STATUS_COLOR.running, STATUS_MARK.running)} ${what} ${step.name}${stage}${step.kind === 'init' ? '' : ` (${step.image})`}\n`,
      );
      return;
    }
    if (step.status === 'pending') return;
    const took = step.started !== undefined && step.finished !== undefined ? ` in ${duration(step.finished - step.started)}` : '';
    const exit =
      step.status === 'failure' || step.status === 'killed' || (step.exitCode !== 0 && step.status !== 'success') ? ` (exit code ${step.exitCode})` : '';
    const error = step.error !== undefined && !/^exited with code \d+$/.test(step.error) ? `: ${step.error}` : '';
    const result = `${name} ${this.#paint(STATUS_COLOR[step.status], `${STATUS_MARK[step.status]} ${step.status}`)}${exit}${took}${error}\n`;
    const state = this.#state(step);
    if (state.logOpen) {
      state.pendingResult = result;
      return;
    }
    await this.#flushPartial(ctx, step);
    await this.#write(ctx, result);
  }

  async appendLog(ctx: Context, target: Target, chunk: Uint8Array): Promise<void> {
    const state = this.#state(target);
    const text = state.partial + state.decoder.write(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength));
    const lines = text.split('\n');
    state.partial = lines.pop() ?? '';
    if (state.partial.length > MAX_PARTIAL) {
      lines.push(state.partial);
      state.partial = '';
    }
    if (lines.length === 0) return;
    const prefix = `${this.#name(target)} ${this.#paint('90', '│')} `;
    await this.#write(ctx, lines.map((line) => `${prefix}${line.replace(/\r$/, '')}\n`).join(''));
  }

  async closeLog(ctx: Context, target: Target): Promise<void> {
    const state = this.#state(target);
    state.partial += state.decoder.end();
    await this.#flushPartial(ctx, target);
    state.logOpen = false;
    await this.#releaseResult(ctx, state);
  }

  async #releaseResult(ctx: Context, state: TargetState): Promise<void> {
    const result = state.pendingResult;
    if (result === undefined) return;
    state.pendingResult = undefined;
    await this.#write(ctx, result);
  }

  runtimeEvent(_ctx: Context, target: Target, event: RuntimeEvent): void {
    const state = this.#state(target);
    let line: string;
    if (event.type === 'pull') {
      if (!this.#pullProgress) return;
      const progress =
        event.current !== undefined && event.total !== undefined && event.total > 0 ? ` ${formatBytes(event.current)}/${formatBytes(event.total)}` : '';
      line = `[pull] ${event.image}: ${event.status}${progress}`;
      // Progress comes often: print a status once, and progress at most per status change.
      const key = `${event.image}:${event.status}`;
      if (key === state.lastPull) return;
      state.lastPull = key;
    } else {
      line = `[${event.reason}] ${event.message}`;
    }
    // Synchronous by contract: written without waiting (lines are short and rare).
    this.#out.write(`${this.#name(target)} ${this.#paint('90', '│')} ${this.#paint('90', line)}\n`);
  }

  #state(target: Target): TargetState {
    let state = this.#targets.get(target.id);
    if (state === undefined) {
      state = { color: PALETTE[this.#targets.size % PALETTE.length] as string, decoder: new StringDecoder('utf8'), partial: '', lastPull: '', logOpen: false };
      this.#targets.set(target.id, state);
      if (!this.#fixedWidth && target.name.length > this.#width) this.#width = Math.min(24, target.name.length);
    }
    return state;
  }

  async #flushPartial(ctx: Context, target: Target): Promise<void> {
    const state = this.#targets.get(target.id);
    if (state === undefined || state.partial === '') return;
    const line = state.partial;
    state.partial = '';
    await this.#write(ctx, `${this.#name(target)} ${this.#paint('90', '│')} ${line}\n`);
  }

  #name(target: Target): string {
    const state = this.#state(target);
    const name = target.name.length > this.#width ? `${target.name.slice(0, this.#width - 1)}…` : target.name.padEnd(this.#width);
    return this.#paint(state.color, name);
  }

  #paint(code: string, text: string): string {
    return this.#color ? `${ESC}${code}m${text}${RESET}` : text;
  }

  async #write(ctx: Context, text: string): Promise<void> {
    if (this.#out.write(text)) return;
    if (this.#out.destroyed || this.#out.writableEnded) return;
    try {
      await once(this.#out, 'drain', { signal: ctx.signal });
    } catch {
      // ctx ended: stop waiting for the terminal.
    }
  }

  #summary(build: BuildReport): string {
    const rows = [...this.#steps.values()].map((s) => [
      s.kind === 'service' ? `${s.name} (service)` : s.stage !== undefined ? `${s.stage}/${s.name}` : s.name,
      s.status,
      s.started !== undefined && s.finished !== undefined ? duration(s.finished - s.started) : '-',
      s.status === 'skipped' || s.status === 'pending' ? '-' : String(s.exitCode),
    ]);
    const header = ['STEP', 'STATUS', 'DURATION', 'EXIT'];
    const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] as string).length)));
    const line = (cells: string[], status?: Status) =>
      cells
        .map((cell, i) => {
          const padded = i === cells.length - 1 ? cell : cell.padEnd(widths[i] as number);
          return i === 1 && status !== undefined ? this.#paint(STATUS_COLOR[status], padded) : padded;
        })
        .join('  ');
    const out = ['', this.#paint('1', line(header)), ...rows.map((r) => line(r, r[1] as Status))];
    const took = build.started !== undefined && build.finished !== undefined ? ` in ${duration(build.finished - build.started)}` : '';
    out.push('', `${this.#paint('1', `build ${build.id}`)} ${this.#paint(STATUS_COLOR[build.status], `${STATUS_MARK[build.status]} ${build.status}`)}${took}`);
    if (build.error !== undefined) out.push(this.#paint(STATUS_COLOR[build.status], build.error));
    return `${out.map((l) => l.trimEnd()).join('\n')}\n`;
  }
}
