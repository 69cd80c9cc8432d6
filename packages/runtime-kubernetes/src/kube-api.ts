/**
 * The runtime's connection to the API server: the KubeConfig, the generated API clients, one shared
 * HTTP dispatcher, and `call()`, which runs one API call under a ctx.
 */
import {
  type ConfigurationOptions,
  CoreV1Api,
  CustomObjectsApi,
  HttpMethod,
  KubeConfig,
  Observable,
  type ObservableMiddleware,
  RequestContext,
  type ResponseContext,
} from '@kubernetes/client-node';
import { type Context, sleep } from '@berth/context';
import { isRuntimeError } from '@berth/runtime';
import { contextError, runtimeError, toRuntimeError, type Where } from './errors.ts';

type Dispatcher = NonNullable<ReturnType<RequestContext['getDispatcher']>>;

/** Options of one {@link KubeApi.call}. */
export interface CallOptions {
  /** Extra request headers, e.g. the Content-Type of a strategic merge patch. */
  headers?: Record<string, string>;
  /** How many times to retry when the server is unavailable (5xx, 429, network). Default 0. */
  retries?: number;
  /** Bound of one attempt; default the runtime's request timeout. */
  timeoutMs?: number;
}

/** Loads a kubeconfig: a path, YAML text (when it contains a newline), or client-node's defaults. */
export function loadKubeConfig(kubeconfig: string | undefined): KubeConfig {
  const kc = new KubeConfig();
  if (kubeconfig === undefined || kubeconfig === '') kc.loadFromDefault();
  else if (kubeconfig.includes('\n')) kc.loadFromString(kubeconfig);
  else kc.loadFromFile(kubeconfig);
  return kc;
}

/**
 * One runtime's API access. Every generated-client call goes through {@link KubeApi.call}, whose
 * middleware hands the call the ctx's signal (client-node's methods take none) and the shared
 * dispatcher (client-node builds a new undici Agent, with its own keep-alive sockets, per request).
 */
export class KubeApi {
  readonly kc: KubeConfig;
  readonly namespace: string;
  readonly server: string;
  readonly core: CoreV1Api;
  readonly custom: CustomObjectsApi;
  readonly requestTimeoutMs: number;
  /** Counts API calls by operation, for tests and the benchmark. */
  readonly calls = new Map<string, number>();
  readonly #dispatcher: Dispatcher | undefined;
  #closed = false;

  private constructor(kc: KubeConfig, namespace: string, dispatcher: Dispatcher | undefined, requestTimeoutMs: number) {
    this.kc = kc;
    this.namespace = namespace;
    this.server = kc.getCurrentCluster()?.server ?? '(no cluster)';
    this.core = kc.makeApiClient(CoreV1Api);
    this.custom = kc.makeApiClient(CustomObjectsApi);
    this.#dispatcher = dispatcher;
    this.requestTimeoutMs = requestTimeoutMs;
  }

  /** Builds the clients; throws a RuntimeError `InvalidConfig` for a kubeconfig without a usable cluster. */
  static async open(kc: KubeConfig, namespace: string | undefined, requestTimeoutMs: number): Promise<KubeApi> {
    const where = { operation: 'create' };
    const cluster = kc.getCurrentCluster();
    if (!cluster) throw runtimeError('InvalidConfig', 'the kubeconfig has no current cluster', where);
    const ns = namespace ?? kc.getContextObject(kc.getCurrentContext())?.namespace ?? 'default';
    // One dispatcher for every call, built once from the kubeconfig's TLS settings.
    const probe = new RequestContext(cluster.server, HttpMethod.GET);
    try {
      await kc.applySecurityAuthentication(probe);
    } catch (error) {
      throw runtimeError('InvalidConfig', `the kubeconfig cannot be used: ${(error as Error).message}`, where, error);
    }
    return new KubeApi(kc, ns, probe.getDispatcher(), requestTimeoutMs);
  }

  /** The shared dispatcher (undefined: undici's global one). */
  get dispatcher(): Dispatcher | undefined {
    return this.#dispatcher;
  }

  /** Client-node request options that abort on `signal`, use the shared dispatcher and set `headers`. */
  requestOptions(signal: AbortSignal, headers: Record<string, string> = {}): ConfigurationOptions {
    const dispatcher = this.#dispatcher;
    const middleware: ObservableMiddleware = {
      pre: (context: RequestContext): Observable<RequestContext> => {
        context.setSignal(signal);
        if (dispatcher) context.setDispatcher(dispatcher);
        for (const [key, value] of Object.entries(headers)) context.setHeaderParam(key, value);
        return new Observable(Promise.resolve(context));
      },
      post: (response: ResponseContext): Observable<ResponseContext> => new Observable(Promise.resolve(response)),
    };
    return { middleware: [middleware], middlewareMergeStrategy: 'append' };
  }

  /**
   * Runs `fn` under `ctx`: rejects at once when ctx is done, aborts the request when ctx ends or the
   * attempt takes longer than the request timeout, retries `Unavailable` answers `retries` times with
   * jittered backoff, and maps every failure to a RuntimeError.
   */
  async call<T>(ctx: Context, where: Where, fn: (options: ConfigurationOptions) => Promise<T>, options: CallOptions = {}): Promise<T> {
    const retries = options.retries ?? 0;
    for (let attempt = 0; ; attempt++) {
      if (ctx.signal.aborted) throw contextError(ctx, where);
      if (this.#closed) throw runtimeError('Unavailable', 'the runtime was closed', where);
      this.calls.set(where.operation, (this.calls.get(where.operation) ?? 0) + 1);
      try {
        return await this.#attempt(ctx, where, fn, options);
      } catch (error) {
        if (!isRuntimeError(error, 'Unavailable') || attempt >= retries || ctx.signal.aborted) throw error;
      }
      const backoff = Math.min(2_000, 100 * 2 ** attempt) * (0.5 + Math.random() / 2);
      try {
        await sleep(ctx, backoff);
      } catch {
        throw contextError(ctx, where);
      }
    }
  }

  async #attempt<T>(ctx: Context, where: Where, fn: (options: ConfigurationOptions) => Promise<T>, options: CallOptions): Promise<T> {
    const controller = new AbortController();
    const timeoutMs = options.timeoutMs ?? this.requestTimeoutMs;
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      controller.abort(new Error(`no answer within ${timeoutMs} ms`));
    }, timeoutMs);
    const onAbort = (): void => controller.abort(ctx.signal.reason);
    ctx.signal.addEventListener('abort', onAbort, { once: true });
    // Settle as soon as ctx ends, even if the request does not notice its signal.
    let rejectAborted: ((error: unknown) => void) | undefined;
    const aborted = new Promise<never>((_, reject) => (rejectAborted = reject));
    controller.signal.addEventListener('abort', () => rejectAborted?.(controller.signal.reason), { once: true });
    aborted.catch(() => undefined);
    const work = fn(this.requestOptions(controller.signal, options.headers));
    work.catch(() => undefined);
    try {
      return await Promise.race([work, aborted]);
    } catch (error) {
      if (ctx.signal.aborted) throw contextError(ctx, where);
      if (timedOut) throw runtimeError('Unavailable', `the API server at ${this.server} did not answer within ${timeoutMs} ms`, where, error);
      throw toRuntimeError(error, ctx, where, this.server);
    } finally {
      clearTimeout(timer);
      ctx.signal.removeEventListener('abort', onAbort);
      if (!controller.signal.aborted) controller.abort(new Error('call settled'));
    }
  }

  /** Closes the shared dispatcher's connections. Idempotent. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    const dispatcher = this.#dispatcher as unknown as { destroy?: () => Promise<void> } | undefined;
    await dispatcher?.destroy?.().catch(() => undefined);
  }
}
