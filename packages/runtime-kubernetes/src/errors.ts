import { type Context, errOf } from '@berth/context';
import { RuntimeError, type RuntimeErrorCode, isRuntimeError } from '@berth/runtime';

/** The runtime's name, in every error and in the descriptor. */
export const RUNTIME_NAME = 'kubernetes';

/** Which call failed, and on what. */
export interface Where {
  operation: string;
  subject?: string | undefined;
}

/** A RuntimeError of this plugin. */
export function runtimeError(code: RuntimeErrorCode, detail: string, where: Where, cause?: unknown): RuntimeError {
  return new RuntimeError(code, detail, { runtime: RUNTIME_NAME, operation: where.operation, subject: where.subject, cause });
}

/** The `Canceled`/`DeadlineExceeded` RuntimeError for a done ctx. */
export function contextError(ctx: Context, where: Where): RuntimeError {
  const err = errOf(ctx);
  const code = err.name === 'DeadlineExceeded' ? 'DeadlineExceeded' : 'Canceled';
  return runtimeError(code, code === 'Canceled' ? 'the context was canceled' : 'the deadline passed', where, ctx.cause() ?? err);
}

/** An HTTP status and the API server's message, from client-node's ApiException (or a Status body). */
interface ApiFailure {
  status: number;
  reason: string;
  message: string;
}

/** Reads the HTTP status and message of a client-node `ApiException` (or anything with `code`/`statusCode` and a Status body). */
function apiFailureOf(error: unknown): ApiFailure | undefined {
  if (error === null || typeof error !== 'object') return undefined;
  const e = error as { code?: unknown; statusCode?: unknown; body?: unknown; message?: unknown };
  const status = typeof e.code === 'number' ? e.code : typeof e.statusCode === 'number' ? e.statusCode : undefined;
  if (status === undefined) return undefined;
  let body: unknown = e.body;
  if (typeof body === 'string') {
    try {
      body = JSON.parse(body) as unknown;
    } catch {
      // not JSON: keep the text
    }
  }
  let message = '';
  let reason = '';
  if (body && typeof body === 'object') {
    const b = body as { message?: unknown; reason?: unknown };
    if (typeof b.message === 'string') message = b.message;
    if (typeof b.reason === 'string') reason = b.reason;
  } else if (typeof body === 'string') {
    message = body.trim();
  }
  if (message === '' && typeof e.message === 'string') message = e.message.split('\n')[0] ?? '';
  return { status, reason, message: message || `HTTP ${status}` };
}

const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'UND_ERR_SOCKET',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_CLOSED',
  'ERR_STREAM_PREMATURE_CLOSE',
  'CERT_HAS_EXPIRED',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'ERR_TLS_CERT_ALTNAME_INVALID',
]);

/** The socket-level error code carried by `error` or its causes, if any. */
function networkCodeOf(error: unknown): string | undefined {
  let current: unknown = error;
  for (let depth = 0; depth < 5 && current && typeof current === 'object'; depth++) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === 'string' && NETWORK_CODES.has(code)) return code;
    if ((current as { message?: unknown }).message === 'fetch failed' && (current as { cause?: unknown }).cause === undefined) return 'fetch failed';
    current = (current as { cause?: unknown }).cause;
  }
  return undefined;
}

/** The RuntimeError code of an API failure status. */
function codeOfStatus(status: number): RuntimeErrorCode {
  if (status === 404) return 'NotFound';
  if (status === 409) return 'AlreadyExists';
  if (status === 401 || status === 403) return 'PermissionDenied';
  if (status === 400 || status === 422) return 'InvalidConfig';
  if (status === 410 || status === 429 || status >= 500) return 'Unavailable';
  return 'Internal';
}

/** Maps any failure of an API call to a RuntimeError (a RuntimeError passes through). */
export function toRuntimeError(error: unknown, ctx: Context, where: Where, server: string): RuntimeError {
  if (isRuntimeError(error)) return error;
  if (ctx.signal.aborted) return contextError(ctx, where);
  const failure = apiFailureOf(error);
  if (failure)
    return runtimeError(
      codeOfStatus(failure.status),
      `API server answered ${failure.status}${failure.reason ? ` ${failure.reason}` : ''}: ${failure.message}`,
      where,
      error,
    );
  const network = networkCodeOf(error);
  if (network)
    return runtimeError('Unavailable', `cannot reach the API server at ${server} (${network}); check the kubeconfig and that the cluster is up`, where, error);
  const message = error instanceof Error ? error.message : String(error);
  return runtimeError('Internal', message, where, error);
}
