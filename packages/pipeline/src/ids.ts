/**
 * Container and build ids as Vela makes them (`pipeline.Build.Prepare` and `Sanitize`), and
 * collision-safe Kubernetes names.
 */
import { createHash } from 'node:crypto';
import type { Build, Container } from './model.ts';

/** Which identity a build is prepared for: the repository's org and name and the build number. */
export interface BuildIdentity {
  org: string;
  repo: string;
  number: number;
  /**
   * A local build (`vela exec`, `berth exec`): an empty org becomes `localOrg`, an empty repo
   * `localRepo`, number 0 becomes 1 (Vela's behaviour).
   */
  local?: boolean;
}

function resolveIdentity(identity: BuildIdentity): { org: string; repo: string; number: number } {
  let { org, repo, number } = identity;
  if (identity.local === true) {
    if (org === '') org = 'localOrg';
    if (repo === '') repo = 'localRepo';
    if (number === 0) number = 1;
  }
  return { org, repo, number };
}

/** A build id, Vela's `PipelineIDPattern`: `<org>_<repo>_<number>`. */
function buildId(org: string, repo: string, number: number): string {
  return `${org}_${repo}_${number}`;
}

/** A step id, Vela's `StepIDPattern`: `step_<org>_<repo>_<number>_<step>`. */
function stepId(org: string, repo: string, number: number, step: string): string {
  return `step_${org}_${repo}_${number}_${step}`;
}

/**
 * The id of a step inside a stage, Vela's `StageIDPattern`: `<org>_<repo>_<number>_<stage>_<step>`.
 *
 * Gotcha: unlike steps and services it has no prefix.
 */
function stageStepId(org: string, repo: string, number: number, stage: string, step: string): string {
  return `${org}_${repo}_${number}_${stage}_${step}`;
}

/** A service id, Vela's `ServiceIDPattern`: `service_<org>_<repo>_<number>_<service>`. */
function serviceId(org: string, repo: string, number: number, service: string): string {
  return `service_${org}_${repo}_${number}_${service}`;
}

/** The id of an external secret's origin container, Vela's `SecretIDPattern`: `secret_<org>_<repo>_<number>_<name>`. */
function secretId(org: string, repo: string, number: number, name: string): string {
  return `secret_${org}_${repo}_${number}_${name}`;
}

/**
 * Sets the ids of a build and its containers in place, as Vela's `Build.Prepare` does, and returns it.
 *
 * Steps (top-level and in stages) also get `directory` = their `VELA_WORKSPACE` environment value
 * ('' when absent); services do not. Secret origins get a `secret_…` id.
 */
export function prepareBuild<B extends Build>(build: B, identity: BuildIdentity): B {
  const { org, repo, number } = resolveIdentity(identity);
  build.id = buildId(org, repo, number);
  for (const stage of build.stages) {
    for (const step of stage.steps) {
      step.id = stageStepId(org, repo, number, stage.name, step.name);
      step.directory = step.environment['VELA_WORKSPACE'] ?? '';
    }
  }
  for (const step of build.steps) {
    step.id = stepId(org, repo, number, step.name);
    step.directory = step.environment['VELA_WORKSPACE'] ?? '';
  }
  for (const service of build.services) service.id = serviceId(org, repo, number, service.name);
  for (const secret of build.secrets) {
    if (secret.origin !== null) secret.origin.id = secretId(org, repo, number, secret.origin.name);
  }
  return build;
}

/** The container runtimes Vela knows. */
export type RuntimeDriver = 'docker' | 'kubernetes';

/**
 * A container id made safe for a runtime the way Vela's `Container.Sanitize` does it.
 *
 * docker: spaces and `/` become `-`. kubernetes: see {@link sanitizeKubernetesName} (Berth's
 * deterministic replacement for Vela's random 6-character suffix).
 */
export function sanitizeContainerId(id: string, driver: RuntimeDriver): string {
  if (driver === 'docker') return id.replaceAll(' ', '-').replaceAll('/', '-');
  return sanitizeKubernetesName(id);
}

/**
 * A build id made safe for a runtime, as Vela's `Build.Sanitize`: docker replaces spaces with `-`;
 * kubernetes uses {@link sanitizeKubernetesName}.
 */
export function sanitizeBuildId(id: string, driver: RuntimeDriver): string {
  if (driver === 'docker') return id.replaceAll(' ', '-');
  return sanitizeKubernetesName(id);
}

/** Maximum length of a DNS-1123 label (a Kubernetes object or container name). */
const DNS_LABEL_MAX_LENGTH = 63;
const HASH_LENGTH = 10;
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

/** True when `name` is a valid DNS-1123 label: lowercase alphanumerics and `-`, at most 63 characters. */
export function isDnsLabel(name: string): boolean {
  return name.length <= DNS_LABEL_MAX_LENGTH && DNS_LABEL.test(name);
}

function stableHash(value: string): string {
  // base32 (a-z2-7) of sha256: 10 characters carry 50 bits.
  const digest = createHash('sha256').update(value, 'utf8').digest();
  const alphabet = 'abcdefghijklmnopqrstuvwxyz234567';
  let bits = 0;
  let acc = 0;
  let out = '';
  for (const byte of digest) {
    acc = (acc << 8) | byte;
    bits += 8;
    while (bits >= 5 && out.length < HASH_LENGTH) {
      out += alphabet[(acc >>> (bits - 5)) & 31];
      bits -= 5;
    }
    acc &= (1 << bits) - 1;
    if (out.length >= HASH_LENGTH) break;
  }
  return out;
}

/**
 * An id as a Kubernetes name (DNS-1123 label): lowercase, `[a-z0-9-]`, at most 63 characters,
 * starting and ending with an alphanumeric.
 *
 * An id that already is a valid label is returned unchanged. Any other id (uppercase, `_`, `.`,
 * spaces, too long …) is mapped, as Vela does, to lowercase with other characters replaced by `-`,
 * cut to fit, and suffixed with `-` and a 10-character hash of the *original* id, so two different
 * ids do not map to the same name (Vela appends a random suffix instead, which is not stable).
 */
export function sanitizeKubernetesName(id: string): string {
  if (isDnsLabel(id)) return id;
  const base = id
    .toLowerCase()
    .replace(/[^a-z0-9-]/g, '-')
    .replace(/^-+/, '');
  const hash = stableHash(id);
  const room = DNS_LABEL_MAX_LENGTH - 1 - HASH_LENGTH;
  const prefix = base.slice(0, room).replace(/-+$/, '');
  return prefix === '' ? hash : `${prefix}-${hash}`;
}

/** Every container of a build (services, steps, stage steps, secret origins), in that order. */
export function allContainers(build: Build): Container[] {
  const out: Container[] = [...build.services, ...build.steps];
  for (const stage of build.stages) out.push(...stage.steps);
  for (const secret of build.secrets) if (secret.origin !== null) out.push(secret.origin);
  return out;
}
