// Kubernetes `Status` objects: every error kube-sim answers is one, as the API server's are.

/** One cause of a 422 Invalid. */
export interface StatusCause {
  reason: string;
  message: string;
  field?: string;
}

/** A `meta/v1 Status` object. */
export interface StatusObject {
  kind: 'Status';
  apiVersion: 'v1';
  metadata: Record<string, never>;
  status: 'Success' | 'Failure';
  message: string;
  reason: string;
  details?: { name?: string; group?: string; kind?: string; uid?: string; causes?: StatusCause[]; retryAfterSeconds?: number };
  code: number;
}

/** An error that the router turns into an HTTP response carrying a Status object. */
export class ApiError extends Error {
  readonly status: StatusObject;
  readonly headers: Record<string, string>;
  constructor(status: StatusObject, headers: Record<string, string> = {}) {
    super(status.message);
    this.name = 'ApiError';
    this.status = status;
    this.headers = headers;
  }
  get code(): number {
    return this.status.code;
  }
}

function failure(code: number, reason: string, message: string, details?: StatusObject['details']): StatusObject {
  return { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, ...(details ? { details } : {}), code };
}

/** 404 for a named object: `pods "x" not found`. */
export function notFound(resource: string, name: string): ApiError {
  return new ApiError(failure(404, 'NotFound', `${resource} "${name}" not found`, { name, kind: resource }));
}

/** 404 for a path kube-sim does not serve. */
export function pathNotFound(): ApiError {
  return new ApiError(failure(404, 'NotFound', 'the server could not find the requested resource', {}));
}

/** 409 AlreadyExists. */
export function alreadyExists(resource: string, name: string): ApiError {
  return new ApiError(failure(409, 'AlreadyExists', `${resource} "${name}" already exists`, { name, kind: resource }));
}

/** 409 Conflict on a stale resourceVersion. */
export function conflict(resource: string, name: string): ApiError {
  return new ApiError(
    failure(
      409,
      'Conflict',
      `Operation cannot be fulfilled on ${resource} "${name}": the object has been modified; please apply your changes to the latest version and try again`,
      {
        name,
        kind: resource,
      },
    ),
  );
}

/** 410 Gone (reason Expired): the resourceVersion is older than the retained history. */
export function gone(message: string): ApiError {
  return new ApiError(failure(410, 'Expired', message));
}

/** The Status a watch sends in an ERROR event when the requested version is too old. */
export function tooOldStatus(requested: number, oldest: number): StatusObject {
  return failure(410, 'Expired', `too old resource version: ${requested} (${oldest})`);
}

/** 422 Invalid with causes, worded as the API server words it. */
export function invalid(kind: string, name: string, causes: StatusCause[]): ApiError {
  const list = causes.map((c) => `${c.field ?? ''}: ${c.message}`);
  const message = `${kind} "${name}" is invalid: ${list.length === 1 ? list[0] : `[${list.join(', ')}]`}`;
  return new ApiError(failure(422, 'Invalid', message, { name, kind: kind.toLowerCase() + 's', causes }));
}

/** 400 BadRequest. */
export function badRequest(message: string): ApiError {
  return new ApiError(failure(400, 'BadRequest', message));
}

/** 401 Unauthorized. */
export function unauthorized(): ApiError {
  return new ApiError(failure(401, 'Unauthorized', 'Unauthorized'));
}

/** 405 MethodNotAllowed. */
export function methodNotAllowed(verb: string): ApiError {
  return new ApiError(failure(405, 'MethodNotAllowed', `the server does not allow this method on the requested resource (${verb})`));
}

/** 415 UnsupportedMediaType. */
export function unsupportedMediaType(contentType: string, accepted: string[]): ApiError {
  return new ApiError(
    failure(
      415,
      'UnsupportedMediaType',
      `the body of the request was in an unknown format (${contentType}) - accepted media types include: ${accepted.join(', ')}`,
    ),
  );
}

/** 500 InternalError. */
export function internalError(message: string): ApiError {
  return new ApiError(failure(500, 'InternalError', `Internal error occurred: ${message}`, { causes: [{ reason: 'UnexpectedServerResponse', message }] }));
}

/** 429 TooManyRequests with Retry-After. */
export function tooManyRequests(retryAfterSeconds = 1): ApiError {
  return new ApiError(failure(429, 'TooManyRequests', 'Too many requests, please try again later.', { retryAfterSeconds }), {
    'retry-after': String(retryAfterSeconds),
  });
}

/**
 * 403 Forbidden as RBAC denies a request: `pods is forbidden: User "u" cannot list resource
 * "pods" in API group "" in the namespace "default"` (kubernetes/kubernetes
 * staging/src/k8s.io/apiserver/pkg/endpoints/handlers/responsewriters/errors.go forbiddenMessage,
 * ForbiddenStatusError; apimachinery errors.NewForbidden).
 */
export function forbidden(
  user: string,
  verb: string,
  resource: string,
  subresource: string | undefined,
  namespace: string | undefined,
  name: string | undefined,
): ApiError {
  const what = subresource ? `${resource}/${subresource}` : resource;
  const scope = namespace ? `in the namespace "${namespace}"` : 'at the cluster scope';
  const reason = `User "${user}" cannot ${verb} resource "${what}" in API group "" ${scope}`;
  const message = name ? `${resource} "${name}" is forbidden: ${reason}` : `${resource} is forbidden: ${reason}`;
  return new ApiError(failure(403, 'Forbidden', message, { ...(name ? { name } : {}), kind: resource }));
}

/**
 * The 504 the watch cache answers when asked for a resourceVersion it has not reached within
 * 3 s (kubernetes/kubernetes staging/src/k8s.io/apiserver/pkg/storage/errors.go
 * NewTooLargeResourceVersionError; cacher/watch_cache.go waitUntilFreshAndBlock, blockTimeout).
 */
export function tooLargeResourceVersion(requested: number, current: number): StatusObject {
  return failure(504, 'Timeout', `Timeout: Too large resource version: ${requested}, current: ${current}`, {
    causes: [{ reason: 'ResourceVersionTooLarge', message: 'Too large resource version' }],
    retryAfterSeconds: 1,
  });
}

/** 410 Expired for a list with resourceVersionMatch=Exact older than the history. */
export function listTooOld(): ApiError {
  return new ApiError(failure(410, 'Expired', 'The resourceVersion for the provided list is too old.'));
}
