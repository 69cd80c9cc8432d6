/**
 * Random pipelines for the soak: steps or stages (a DAG on `needs`), services, detached steps,
 * secrets (single-line and multi-line), failing steps with and without `continue`,
 * steps slow enough for a timeout or a cancel to catch them running.
 *
 * Shapes follow go-vela/server's compiled pipeline (`compiler/types/pipeline/build.go`): a build
 * has steps or stages, never both; services run detached (go-vela/worker `executor/linux/service.go`).
 */
import { type Build, type Container, emptyBuild, emptyContainer, prepareBuild, type Secret, type Stage } from '@berth/pipeline';
import { int, pick } from '../prng.ts';

const BUSYBOX = process.env.BERTH_BUSYBOX_IMAGE ?? 'berth/busybox:1.35';

/** What the generator may produce. */
export interface PipelineOptions {
  /** Multi-line secret values (on unless `SOAK_MULTILINE=0`). */
  multiline: boolean;
  /** The longest sleep of a "slow" step, in seconds (what a timeout or cancel catches). */
  slowSeconds: number;
  /** Most containers (services + steps) in one build; Docker builds keep it small. */
  maxContainers: number;
  /** How often a step is slow (sleeps 1 to `slowSeconds` s). */
  slowRate: number;
}

/** A generated pipeline and what the soak needs to judge it. */
export interface SoakPipeline {
  build: Build;
  /** The secrets' values (every form of each must stay out of logs and errors). */
  secretValues: string[];
  /** The containers it has, by name, with the exit code the script ends with when it runs to its end. */
  exits: Map<string, number>;
}

const ALNUM = 'ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789';

function word(rand: () => number, length: number): string {
  let out = '';
  for (let i = 0; i < length; i++) out += ALNUM[Math.floor(rand() * ALNUM.length)];
  return out;
}

/** A value no pipeline prints by accident: `Zq` + 10–20 characters. */
function singleLineSecret(rand: () => number): string {
  return `Zq${word(rand, int(rand, 10, 20))}`;
}

function multiLineSecret(rand: () => number): string {
  const lines = Array.from({ length: int(rand, 2, 3) }, () => `ml-${word(rand, int(rand, 6, 12))}`);
  // Sometimes a short line (< 4 characters, not masked alone, as documented) and CRLF endings.
  if (rand() < 0.3) lines.splice(1, 0, word(rand, 2));
  const eol = rand() < 0.2 ? '\r\n' : '\n';
  return lines.join(eol) + (rand() < 0.6 ? eol : '');
}

function secretOf(name: string, value: string): Secret {
  return { name, value, key: `soak/repo/${name}`, engine: 'native', type: 'repo', origin: null, pull: 'build_start' };
}

/** Commands that print a secret the ways scripts do. */
function secretLines(rand: () => number, env: string, multiline: boolean): string[] {
  const lines = [`echo "${env.toLowerCase()}=$${env}"`, `printf '%s\\n' "$${env}"`, `echo $${env} done`, `echo "$${env}$${env}"`];
  if (multiline) lines.push(`echo unquoted=$${env}`, `printf '%s' "$${env}"`);
  return [pick(rand, lines), ...(rand() < 0.4 ? [pick(rand, lines)] : [])];
}

/**
 * One random pipeline named `soak_<seed>_<n>`; the same `rand` state gives the same pipeline.
 */
export function randomPipeline(rand: () => number, n: number, options: PipelineOptions): SoakPipeline {
  const secrets: Secret[] = [];
  const secretCount = int(rand, 0, 2);
  for (let i = 0; i < secretCount; i++) {
    const multi = options.multiline && rand() < 0.5;
    secrets.push(secretOf(`s${i}`, multi ? multiLineSecret(rand) : singleLineSecret(rand)));
  }
  const exits = new Map<string, number>();
  let count = 0;
  const container = (name: string, kind: 'step' | 'service' | 'detached'): Container => {
    count++;
    const commands: string[] = [];
    const refs = secrets.filter(() => rand() < 0.6).map((s) => ({ source: s.name, target: s.name.toUpperCase() }));
    const roll = rand();
    if (kind !== 'step') {
      const lines = refs.length > 0 ? secretLines(rand, refs[0]?.target ?? '', options.multiline).join('; ') : `echo ${name} alive`;
      commands.push(`while true; do ${lines}; sleep 0.0${int(rand, 2, 9)}; done`);
    } else {
      commands.push(`echo start ${name}`);
      if (rand() < 0.5) commands.push(`seq 1 ${int(rand, 1, 300)}`);
      for (const ref of refs) commands.push(...secretLines(rand, ref.target, options.multiline));
      if (roll < options.slowRate) commands.push(`sleep ${int(rand, 1, options.slowSeconds)}`);
      else if (rand() < 0.5) commands.push(`sleep 0.0${int(rand, 1, 9)}`);
    }
    const code = kind === 'step' && rand() < 0.2 ? int(rand, 1, 3) : 0;
    if (code !== 0) commands.push(`exit ${code}`);
    exits.set(name, code);
    const c = emptyContainer({ name, image: BUSYBOX, pull: 'never', commands, secrets: refs, detach: kind === 'detached' });
    if (kind === 'service') c.entrypoint = ['sh', '-c'];
    if (kind === 'service') c.commands = [commands.join('; ')];
    if (code !== 0 && rand() < 0.5) c.ruleset.continue = true;
    // A step that runs only when the build failed (Vela's `ruleset: { status: [failure] }`).
    if (kind === 'step' && rand() < 0.1) c.ruleset.if.status = ['failure'];
    return c;
  };

  const services: Container[] = [];
  const serviceCount = rand() < 0.3 ? int(rand, 1, 2) : 0;
  for (let i = 0; i < serviceCount && count < options.maxContainers; i++) services.push(container(`svc${i}`, 'service'));

  const steps: Container[] = [];
  const stages: Stage[] = [];
  if (rand() < 0.5) {
    const stepCount = int(rand, 1, 4);
    for (let i = 0; i < stepCount && count < options.maxContainers; i++) steps.push(container(`step${i}`, rand() < 0.1 ? 'detached' : 'step'));
  } else {
    const stageCount = int(rand, 1, 4);
    for (let s = 0; s < stageCount && count < options.maxContainers; s++) {
      const needs = stages.filter(() => rand() < 0.4).map((st) => st.name);
      const stageSteps: Container[] = [];
      const stepCount = int(rand, 1, 3);
      for (let i = 0; i < stepCount && count < options.maxContainers; i++) stageSteps.push(container(`st${s}s${i}`, rand() < 0.1 ? 'detached' : 'step'));
      stages.push({ name: `stage${s}`, needs, independent: rand() < 0.2, environment: {}, steps: stageSteps });
    }
  }
  if (steps.length === 0 && stages.length === 0) steps.push(container('only', 'step'));

  const build = prepareBuild(emptyBuild({ services, steps, stages, secrets }), { org: 'soak', repo: 'repo', number: n });
  let number = 2;
  for (const s of build.steps) s.number = number++;
  for (const st of build.stages) for (const s of st.steps) s.number = number++;
  let m = 1;
  for (const s of build.services) s.number = m++;
  return { build, secretValues: secrets.map((s) => s.value), exits };
}

/**
 * Every form of a secret that must never be printed: the raw value, with the trailing newline
 * trimmed, newline→space, CRLF, JSON-escaped, and each line of 4 characters or more (go-vela/worker
 * `executor/linux/step.go` getSecretValues masks the trimmed and newline→space forms; GitHub
 * Actions masks each line; issue #13 item 1 lists the rest).
 */
export function secretForms(value: string): string[] {
  const forms = new Set<string>();
  const add = (form: string): void => {
    if (form.length >= 4) forms.add(form);
  };
  const trimmed = value.replace(/\r?\n$/, '');
  const lines = trimmed.split(/\r?\n/);
  for (const v of [value, trimmed]) {
    add(v);
    add(JSON.stringify(v).slice(1, -1));
  }
  if (lines.length > 1) {
    add(lines.join(' '));
    add(lines.join('\r\n'));
    add(lines.join('\n'));
    for (const line of lines) add(line);
  }
  return [...forms];
}
