/**
 * One build's outputs: whether they are on, what the steps wrote so far, and the masked values.
 * The rules are in outputs.ts; this holds the state and talks to the runtime.
 */
import type { Context } from '@berth/context';
import type { Build, Container } from '@berth/pipeline';
import { OUTPUTS_PATH, type Runtime, supportsOutputs } from '@berth/runtime';
import { decodeOutputs, imageNames, NO_OUTPUTS, OUTPUT_FILES, type OutputFile, type Outputs } from './outputs.ts';

/** A step whose image needs a value no compiled variable, worker variable or secret gives. */
interface OutputsNeed {
  step: string;
  image: string;
  names: string[];
}

/** Why a build's outputs are off, for the refusal of a build that needs them. */
function offReason(enabled: boolean, runtime: Runtime): string {
  if (!supportsOutputs(runtime))
    return `the ${runtime.name} runtime does not offer outputs (as Vela's Kubernetes runtime, its containers' environment is fixed when the build starts): run the pipeline on docker, or set the value in the step's environment`;
  if (!enabled) return 'outputs are off on this worker: set VELA_EXECUTOR_OUTPUTS_IMAGE (--executor-outputs-image) to turn them on';
  return '';
}

/** The state of one build's outputs. */
export class BuildOutputs {
  /** Outputs are on: asked for, and the runtime offers them. */
  readonly active: boolean;
  readonly #runtime: Runtime;
  readonly #enabled: boolean;
  #current: Outputs = NO_OUTPUTS;
  readonly #masked = new Set<string>();
  /** Warnings already given: the files are read after every step, a warning is given once. */
  readonly #warned = new Set<string>();

  constructor(runtime: Runtime, enabled: boolean) {
    this.#runtime = runtime;
    this.#enabled = enabled;
    this.active = enabled && supportsOutputs(runtime);
  }

  /** What the steps wrote so far (the files as last read). */
  get current(): Outputs {
    return this.#current;
  }

  /** Every masked value seen so far (not blank), for the masker. */
  maskedValues(): string[] {
    return [...this.#masked];
  }

  /**
   * When outputs are off, an error message naming the steps whose image needs a `${KEY}` that
   * only an output could give (`known(step, name)`: the step's environment will have `name`).
   * Undefined when the build can run.
   */
  refusal(steps: readonly Container[], known: (step: Container, name: string) => boolean): string | undefined {
    if (this.active) return undefined;
    const needs: OutputsNeed[] = [];
    for (const step of steps) {
      const missing = imageNames(step.image).filter((name) => !known(step, name));
      if (missing.length > 0) needs.push({ step: step.name, image: step.image, names: missing });
    }
    if (needs.length === 0) return undefined;
    const list = needs.map((n) => `step "${n.step}" (image "${n.image}" needs ${n.names.map((k) => `\${${k}}`).join(', ')})`).join('; ');
    return `${list}: these values can only come from outputs (${OUTPUTS_PATH}/.env of an earlier step), but ${offReason(this.#enabled, this.#runtime)}`;
  }

  /**
   * An error message naming the services whose image needs a `${KEY}` their environment will not
   * have: services never get outputs (go-vela/worker lays them on steps only, executor/linux/build.go
   * ExecBuild), so such an image could only become an invalid reference. Undefined when none does.
   */
  static serviceRefusal(services: readonly Container[], known: (service: Container, name: string) => boolean): string | undefined {
    const needs: OutputsNeed[] = [];
    for (const service of services) {
      const missing = imageNames(service.image).filter((name) => !known(service, name));
      if (missing.length > 0) needs.push({ step: service.name, image: service.image, names: missing });
    }
    if (needs.length === 0) return undefined;
    const list = needs.map((n) => `service "${n.step}" (image "${n.image}" needs ${n.names.map((k) => `\${${k}}`).join(', ')})`).join('; ');
    return `${list}: services get no outputs, as in Vela; set the value in the service's environment`;
  }

  /**
   * Reads the four files through `container` (a step that ended) and makes them the build's
   * outputs, as Vela's poll does before each step (the files whole, each time). Returns the new
   * masked values and a warning per file or value it could not use (each warning once per build). Rejects with the runtime's
   * error when a file cannot be read.
   */
  async poll(ctx: Context, build: Build, container: Container): Promise<{ masked: string[]; warnings: string[] }> {
    const runtime = this.#runtime;
    if (!this.active || !supportsOutputs(runtime)) return { masked: [], warnings: [] };
    // The four reads at once: they are on the build's path from one step to the next.
    const read = await Promise.all(OUTPUT_FILES.map((file) => runtime.readOutput(ctx, build, container, file)));
    const files: Partial<Record<OutputFile, Uint8Array | undefined>> = {};
    OUTPUT_FILES.forEach((file, i) => (files[file] = read[i]));
    const { outputs, warnings } = decodeOutputs(files);
    this.#current = outputs;
    const masked: string[] = [];
    for (const value of Object.values(outputs.masked)) {
      if (value.trim() === '' || this.#masked.has(value)) continue;
      this.#masked.add(value);
      masked.push(value);
    }
    const fresh = warnings.filter((warning) => !this.#warned.has(warning));
    for (const warning of fresh) this.#warned.add(warning);
    return { masked, warnings: fresh };
  }
}
