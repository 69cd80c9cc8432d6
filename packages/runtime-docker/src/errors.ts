import { type Context, DeadlineExceeded, errOf } from '@berth/context';
import { RuntimeError, type RuntimeErrorCode } from '@berth/runtime';

/** The runtime's name, as it appears in every error and in the descriptor. */
export const RUNTIME_NAME = 'docker';

/** Which call failed, and on what: the prefix of every {@link RuntimeError} this plugin throws. */
export interface Where {
  operation: string;
  subject?: string | undefined;
}

/** What the caller knows about the engine it talks to, for messages about an unreachable one. */
export interface EngineDescription {
  /** Where the engine is expected, e.g. `unix:///var/run/docker.sock`. */
  readonly endpoint: string;
  /** How the endpoint was chosen, e.g. `DOCKER_HOST=tcp://…` or `the socketPath option`. */
  readonly source: string;
}

/** An error thrown by dockerode / docker-modem: an HTTP status with the engine's JSON, or a socket error. */
interface EngineError {
  statusCode?: number;
  json?: unknown;
  code?: string;
  message?: string;
  name?: string;
}

/** Network-level error codes meaning "the engine is not there (any more)". */
const UNAVAILABLE_CODES = new Set([
  'ECONNREFUSED',
  'ENOENT',
  'EPIPE',
  'ECONNRESET',
  'ENOTCONN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ETIMEDOUT',
  'EAI_AGAIN',
  'ENOTFOUND',
  'EACCES',
  'ERR_STREAM_PREMATURE_CLOSE',
  'UND_ERR_SOCKET',
]);

/** The engine's own message from an HTTP error (`{"message": "…"}`), or the error's message. */
export function engineMessage(error: unknown): string {
  const e = (error ?? {}) as EngineError;
  const json = e.json;
  if (json && typeof json === 'object' && 'message' in json && typeof json.message === 'string') return json.message.trim();
  if (typeof json === 'string' && json.trim()) return json.trim();
  if (Buffer.isBuffer(json) && json.length > 0) return json.toString('utf8').trim();
  const message = typeof e.message === 'string' ? e.message : String(error);
  // docker-modem formats HTTP errors as "(HTTP code 404) no such container - <cause> ".
  const match = /^\(HTTP code \d+\) [^-]*- (.*)$/s.exec(message.trim());
  return (match?.[1] ?? message).trim();
}

/** The HTTP status of an engine error, if it has one. */
export function statusOf(error: unknown): number | undefined {
  const status = (error as EngineError | undefined)?.statusCode;
  return typeof status === 'number' ? status : undefined;
}

/** The socket error code of an engine error (`ECONNREFUSED`, …), if it has one. */
function socketCodeOf(error: unknown): string | undefined {
  let current: unknown = error;
  for (let depth = 0; depth < 4 && current && typeof current === 'object'; depth++) {
    const code = (current as EngineError).code;
    if (typeof code === 'string' && UNAVAILABLE_CODES.has(code)) return code;
    if ((current as EngineError).message === 'socket hang up' || (current as EngineError).message === 'aborted') return 'ECONNRESET';
    current = (current as { cause?: unknown }).cause;
  }
  return undefined;
}

/** True when `error` says the engine cannot be reached or went away mid-call. */
export function isUnavailable(error: unknown): boolean {
  return socketCodeOf(error) !== undefined;
}

/** A `Canceled` or `DeadlineExceeded` RuntimeError for a done ctx. */
export function contextError(ctx: Context, where: Where, cause?: unknown): RuntimeError {
  const err = errOf(ctx);
  const code: RuntimeErrorCode = err instanceof DeadlineExceeded ? 'DeadlineExceeded' : 'Canceled';
  const detail = code === 'DeadlineExceeded' ? 'gave up: the deadline passed (context deadline exceeded)' : 'gave up: the call was canceled (context canceled)';
  return new RuntimeError(code, detail, { runtime: RUNTIME_NAME, ...where, cause: cause ?? err });
}

/** A RuntimeError of this plugin. */
export function runtimeError(code: RuntimeErrorCode, detail: string, where: Where, cause?: unknown): RuntimeError {
  return new RuntimeError(code, detail, { runtime: RUNTIME_NAME, ...where, cause });
}

/** The "what happened, what to do" message for an engine that cannot be reached. */
function unavailableDetail(engine: EngineDescription, error: unknown): string {
  const code = socketCodeOf(error) ?? 'error';
  const what =
    code === 'ECONNRESET' || code === 'EPIPE' || code === 'ERR_STREAM_PREMATURE_CLOSE'
      ? `the Docker engine at ${engine.endpoint} closed the connection mid-call (${code}); was dockerd stopped or restarted?`
      : code === 'EACCES'
        ? `permission denied on the Docker engine's socket ${engine.endpoint} (EACCES); run the worker as a user in the docker group`
        : `cannot reach the Docker engine at ${engine.endpoint} (${code}: ${engineMessage(error)})`;
  return `${what}. Is dockerd running? Check ${engine.source}, or start the engine (\`systemctl start docker\`).`;
}

/**
 * Turns anything a dockerode call threw into a {@link RuntimeError}: ctx first (a done ctx wins
 * over whatever the aborted socket said), then socket errors, then the engine's HTTP status.
 * `overrides` maps a status to a code for calls where the generic meaning is wrong (a 404 from
 * `create` means the image is missing, not the container).
 */
export function toRuntimeError(
  error: unknown,
  ctx: Context,
  where: Where,
  engine: EngineDescription,
  overrides: Partial<Record<number, RuntimeErrorCode>> = {},
): RuntimeError {
  if (error instanceof RuntimeError) return error;
  if (ctx.signal.aborted) return contextError(ctx, where, error);
  if (isUnavailable(error)) return runtimeError('Unavailable', unavailableDetail(engine, error), where, error);
  const status = statusOf(error);
  const message = engineMessage(error);
  if (status === undefined) {
    return runtimeError('Internal', `unexpected error talking to the Docker engine: ${message}`, where, error);
  }
  const code = overrides[status] ?? codeForStatus(status, message);
  return runtimeError(code, `the Docker engine answered ${status}: ${message}`, where, error);
}

function codeForStatus(status: number, message: string): RuntimeErrorCode {
  if (status === 404) return /no such image|pull access denied|manifest unknown|repository does not exist/i.test(message) ? 'ImageNotFound' : 'NotFound';
  if (status === 409) return 'AlreadyExists';
  if (status === 400) return 'InvalidConfig';
  if (status === 401 || status === 403) return 'PermissionDenied';
  if (status === 503 || status === 502) return 'Unavailable';
  return 'Internal';
}
