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
 * The brand every {@link RuntimeError} carries, shared by every copy of this package in a process
 * (`Symbol.for`): a plugin built against its own installed `@berth/runtime` and a worker that bundles
 * another copy still recognise each other's errors, as Node's errors are known by `code`.
 */
const BRAND: unique symbol = Symbol.for('@berth/runtime.RuntimeError');

/** Whether `value` carries the brand of a {@link RuntimeError} of any copy, with a code. */
function isBranded(value: unknown): value is RuntimeError {
  return (
    typeof value === 'object' && value !== null && (value as { [BRAND]?: unknown })[BRAND] === true && typeof (value as { code?: unknown }).code === 'string'
  );
}

/**
 * The one error type every runtime method rejects with.
 *
 * Its message names the runtime, the operation and the subject, then what happened:
 * `[docker] runContainer step_org_repo_1_test: image "berth/none:1" not found locally and pull policy is "never"`.
 *
 * Gotcha: recognise it with {@link isRuntimeError}. `instanceof RuntimeError` works too, across
 * copies of this package (it checks the brand), but `instanceof` a subclass is by class only.
 */
export class RuntimeError extends Error {
  /** `instanceof RuntimeError` is true for a RuntimeError of any copy of this package (by its brand). */
  static override [Symbol.hasInstance](value: unknown): boolean {
    if (this !== RuntimeError) return Function.prototype[Symbol.hasInstance].call(this, value);
    return isBranded(value);
  }

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
    Object.defineProperty(this, BRAND, { value: true });
  }
}

/**
 * True when `error` is a {@link RuntimeError} — made by any copy of this package, so a plugin's
 * errors are recognised by a worker that holds another copy — optionally with one of the given codes.
 */
export function isRuntimeError(error: unknown, ...codes: RuntimeErrorCode[]): error is RuntimeError {
  return isBranded(error) && (codes.length === 0 || codes.includes(error.code));
}
