/**
 * Why a runtime call failed, in words the executor can turn into a clear message.
 *
 * - `ImageNotFound`: the image does not exist locally and may not be pulled (`pull: never`), or the registry has no such image.
 * - `ImagePullFailed`: pulling failed (registry unreachable, auth, back-off); the message carries the engine's reason.
 * - `InvalidConfig`: the request itself is wrong (invalid image reference, bad volume, unknown ulimit, …); retrying cannot help.
 * - `NotFound`: the container, network, volume or pod does not exist (any more).
 * - `AlreadyExists`: something of that name exists already.
 * - `Unavailable`: the engine or API server cannot be reached, or went away mid-call.
 * - `Canceled` / `DeadlineExceeded`: the call's ctx ended first.
 * - `PermissionDenied`: the engine refused (privileged, RBAC, …).
 * - `ContainerFailed`: the container could not be started or was lost (evicted, OOM before start, …).
 * - `Internal`: anything else; a bug in the plugin or an unexpected answer.
 */
export type RuntimeErrorCode =
  | 'ImageNotFound'
  | 'ImagePullFailed'
  | 'InvalidConfig'
  | 'NotFound'
  | 'AlreadyExists'
  | 'Unavailable'
  | 'Canceled'
  | 'DeadlineExceeded'
  | 'PermissionDenied'
  | 'ContainerFailed'
  | 'Internal';

/** Where a {@link RuntimeError} came from. */
export interface RuntimeErrorOptions {
  /** The runtime's name, e.g. `docker`. */
  runtime: string;
  /** The contract method that failed, e.g. `runContainer`. */
  operation: string;
  /** The container, build, network or volume id the call was about. */
  subject?: string;
  /** The underlying error. */
  cause?: unknown;
}

/**
 * The one error type every runtime method rejects with.
 *
 * Its message names the runtime, the operation and the subject, then what happened:
 * `[docker] runContainer step_org_repo_1_test: image "berth/none:1" not found locally and pull policy is "never"`.
 */
export class RuntimeError extends Error {
  override readonly name = 'RuntimeError';
  readonly code: RuntimeErrorCode;
  readonly runtime: string;
  readonly operation: string;
  readonly subject: string | undefined;
  /** The message without the `[runtime] operation subject:` prefix. */
  readonly detail: string;

  constructor(code: RuntimeErrorCode, detail: string, options: RuntimeErrorOptions) {
    const where = options.subject ? `${options.operation} ${options.subject}` : options.operation;
    super(`[${options.runtime}] ${where}: ${detail}`, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.runtime = options.runtime;
    this.operation = options.operation;
    this.subject = options.subject;
    this.detail = detail;
  }
}

/** True when `error` is a {@link RuntimeError}, optionally with one of the given codes. */
export function isRuntimeError(error: unknown, ...codes: RuntimeErrorCode[]): error is RuntimeError {
  return error instanceof RuntimeError && (codes.length === 0 || codes.includes(error.code));
}
