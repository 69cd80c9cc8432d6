import { background, type Context } from '@berth/context';
import { type Build, type Container, emptyBuild, emptyContainer, prepareBuild, type Secret, type Stage } from '@berth/pipeline';
import type { Runtime, RuntimeConfig } from '@berth/runtime';
import { DummyEngine, dummyRuntime } from '@berth/runtime-dummy';
import type { BuildReport, Reporter, StepReport, Target } from '../src/reporter.ts';
import type { RuntimeEvent } from '@berth/runtime';

export const BUSYBOX = process.env.BERTH_BUSYBOX_IMAGE ?? 'berth/busybox:1.35';
export const PAUSE = process.env.BERTH_PAUSE_IMAGE ?? 'berth/pause:1';

/** A step (or service) on busybox. */
export function ctn(name: string, fields: Partial<Container> = {}): Container {
  return emptyContainer({ name, image: BUSYBOX, pull: 'not_present', ...fields });
}

/** A stage. */
export function stage(name: string, steps: Container[], fields: Partial<Stage> = {}): Stage {
  return { name, needs: [], independent: false, environment: {}, steps, ...fields };
}

/** A secret with its value. */
export function secret(name: string, value: string): Secret {
  return { name, value, key: `org/repo/${name}`, engine: 'native', type: 'repo', origin: null, pull: 'build_start' };
}

// Test files run at once on one Docker engine (and kube-sim): each starts at its own number, so
// their builds never share a network, volume or container name.
let buildNumber = 1_000 * (1 + Math.floor(Math.random() * 900_000));

/** A prepared build (ids set, numbers from 2 on: 1 is the init step). */
export function makeBuild(fields: Partial<Build> = {}): Build {
  const build = prepareBuild(emptyBuild(fields), { org: 'org', repo: 'repo', number: ++buildNumber });
  let n = 2;
  for (const s of build.steps) s.number = n++;
  for (const st of build.stages) for (const s of st.steps) s.number = n++;
  let m = 1;
  for (const s of build.services) s.number = m++;
  return build;
}

/** A dummy runtime on its own engine. */
export async function dummy(config: Partial<RuntimeConfig> = {}, options: { latencyMs?: number } = {}): Promise<{ runtime: Runtime; engine: DummyEngine }> {
  const engine = new DummyEngine();
  const runtime = await dummyRuntime({ engine, ...options }).create(background(), { workerId: 'test-worker', ...config });
  return { runtime, engine };
}

/** A reporter that records everything. */
export class RecordingReporter implements Reporter {
  readonly builds: BuildReport[] = [];
  readonly steps: StepReport[] = [];
  readonly chunks = new Map<string, Buffer[]>();
  readonly closed: string[] = [];
  readonly events: Array<{ target: Target; event: RuntimeEvent }> = [];
  /** Optional delay per appendLog, to act as a slow server. */
  appendDelayMs = 0;

  buildStatus(_ctx: Context, build: BuildReport): Promise<void> {
    this.builds.push(build);
    return Promise.resolve();
  }
  stepStatus(_ctx: Context, step: StepReport): Promise<void> {
    this.steps.push(step);
    return Promise.resolve();
  }
  async appendLog(_ctx: Context, target: Target, chunk: Uint8Array): Promise<void> {
    if (this.closed.includes(target.name)) throw new Error(`appendLog after closeLog for ${target.name}`);
    if (this.appendDelayMs > 0) await new Promise((resolve) => setTimeout(resolve, this.appendDelayMs));
    const list = this.chunks.get(target.name) ?? [];
    list.push(Buffer.from(chunk));
    this.chunks.set(target.name, list);
  }
  closeLog(_ctx: Context, target: Target): Promise<void> {
    this.closed.push(target.name);
    return Promise.resolve();
  }
  runtimeEvent(_ctx: Context, target: Target, event: RuntimeEvent): void {
    this.events.push({ target, event });
  }

  /** A target's whole log. */
  log(name: string): string {
    return Buffer.concat(this.chunks.get(name) ?? []).toString('utf8');
  }
  /** The statuses a target went through. */
  statuses(name: string): string[] {
    return this.steps.filter((s) => s.name === name).map((s) => s.status);
  }
  /** The last report of a target. */
  last(name: string): StepReport | undefined {
    return this.steps.filter((s) => s.name === name).at(-1);
  }
  /** The build's last status. */
  get buildStatusNow(): string | undefined {
    return this.builds.at(-1)?.status;
  }
}
