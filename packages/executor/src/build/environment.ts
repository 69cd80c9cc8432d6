/**
 * Secrets and environment of a build's containers: the variables Vela's worker sets, the secrets
 * injected before and after substitution, and the values the executor must mask (secrets and the
 * credentials it sets).
 */
import { applyScript, type Container } from '@berth/pipeline';
import { maskText } from '../log/masker.ts';
import { applyOutputs, type Outputs, OUTPUTS_DIR } from '../outputs/outputs.ts';
import { injectSecrets, type LoadedSecret, substituteContainer } from '../secrets.ts';

/** Environment variables whose values are credentials, masked in logs and in every error string. */
const CREDENTIAL_ENV = ['VELA_NETRC_PASSWORD', 'VELA_GIT_TOKEN', 'VELA_ID_TOKEN_REQUEST_TOKEN'] as const;

/** The values of the container's credential variables that are set. */
export function credentialsOf(container: Container): string[] {
  const values: string[] = [];
  for (const name of CREDENTIAL_ENV) {
    const value = container.environment[name];
    if (value !== undefined && value !== '') values.push(value);
  }
  return values;
}

/** `text` with every form of every value in `secrets` and of every credential of `containers` masked. */
export function maskSecrets(text: string, secrets: Iterable<string>, containers: Iterable<Container>): string {
  const values = [...secrets];
  for (const container of containers) values.push(...credentialsOf(container));
  return values.length === 0 ? text : maskText(text, values);
}

/** The worker's variables of {@link prepareEnvironment}. */
export interface WorkerVariables {
  /** Laid over the container's environment first (the build's and the repo's variables). */
  readonly environment?: (container: Container) => Readonly<Record<string, string>>;
  readonly host: string;
  readonly runtime: string;
  readonly version: string;
}

/**
 * The worker's own variables in every container, as go-vela/worker internal/step/environment.go
 * Environment sets them: distribution, host, runtime, the version in Vela's form (`v0.28.1`: W
 * version.New's Semantic is the canonical tag), and for steps the four outputs files (set
 * whether or not outputs are on).
 */
function workerEnvironment(vars: WorkerVariables, kind: 'step' | 'service' | 'init'): Record<string, string> {
  const env: Record<string, string> = {
    VELA_DISTRIBUTION: 'linux',
    VELA_HOST: vars.host,
    VELA_RUNTIME: vars.runtime,
    VELA_VERSION: /^\d/.test(vars.version) ? `v${vars.version}` : vars.version,
  };
  // W internal/service/environment.go Environment sets no outputs files for a service.
  if (kind === 'service') return env;
  return {
    ...env,
    VELA_OUTPUTS: `${OUTPUTS_DIR}/.env`,
    VELA_MASKED_OUTPUTS: `${OUTPUTS_DIR}/masked.env`,
    VELA_BASE64_OUTPUTS: `${OUTPUTS_DIR}/base64.env`,
    VELA_MASKED_BASE64_OUTPUTS: `${OUTPUTS_DIR}/masked.base64.env`,
  };
}

/**
 * A step's `VELA_STEP_*` variables as go-vela/worker gives them on Docker: executor/linux/step.go
 * PlanStep marks the step running and lays S api/types/step.go `Step.Environment()` of it
 * (host, runtime and distribution from the build: StepFromBuildContainer) over the container.
 * Gotcha: Berth lays a container's environment when the build is assembled, before the step
 * starts, so `VELA_STEP_STARTED` is 0 and `VELA_STEP_CREATED` is not set (daemon
 * VELA-DIFFERENCES.md); the exit code is 0 while the step runs.
 */
function stepEnvironment(container: Container, vars: WorkerVariables): Record<string, string> {
  return {
    VELA_STEP_DISTRIBUTION: 'linux',
    VELA_STEP_EXIT_CODE: '0',
    VELA_STEP_HOST: vars.host,
    VELA_STEP_IMAGE: container.image,
    VELA_STEP_NAME: container.name,
    VELA_STEP_NUMBER: String(container.number),
    VELA_STEP_RUNTIME: vars.runtime,
    VELA_STEP_STAGE: container.environment['VELA_STEP_STAGE'] ?? '',
    VELA_STEP_STARTED: '0',
    VELA_STEP_STATUS: 'running',
    VELA_STEP_REPORT_AS: container.report_as,
  };
}

/**
 * Makes the container's environment as Vela's worker does: the build's and the worker's
 * variables, the secrets that allow substitution, the commands as the build script (steps only;
 * a service keeps its commands), `${NAME}` substituted in every field, then the secrets that do
 * not allow substitution. With `outputs`, a step's outputs join the environment before the
 * script and the substitution. Returns one note per secret withheld (never a value).
 */
export function prepareEnvironment(
  container: Container,
  kind: 'step' | 'service' | 'init',
  vars: WorkerVariables,
  secrets: ReadonlyMap<string, LoadedSecret>,
  outputs?: Outputs,
): string[] {
  const env = container.environment;
  if (vars.environment !== undefined) Object.assign(env, vars.environment(container));
  Object.assign(env, workerEnvironment(vars, kind));
  if (kind === 'step') Object.assign(env, stepEnvironment(container, vars));
  const notes = injectSecrets(container, secrets, 'substitutable');
  // Outputs after the worker's variables and the secrets, never over them, before the script and
  // substitution (go-vela/worker executor/linux/build.go ExecBuild: outputs.Process, Script, Substitute).
  if (outputs !== undefined) applyOutputs(env, outputs);
  // A step's commands become the build script (base64, so substitution leaves it alone).
  if (kind !== 'service' && container.commands.length > 0) Object.assign(container, applyScript(container));
  substituteContainer(container);
  notes.push(...injectSecrets(container, secrets, 'protected'));
  return notes;
}
