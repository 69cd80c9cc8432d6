/**
 * Configuration of `berth start`, read from flags and from Vela's environment variables (the
 * first variable listed wins, flags win over the environment, as in go-vela/worker), validated
 * with zod, with one error listing every problem.
 */
import { parseSentinelUrl } from './queue.ts';
import { hostname as osHostname } from 'node:os';
import { parseGoDuration } from '@berth/context';
import { z } from 'zod';

export { parseGoDuration };

/** Go's strconv.ParseBool. */
function parseGoBool(text: string): boolean | undefined {
  if (['1', 't', 'T', 'TRUE', 'true', 'True'].includes(text.trim())) return true;
  if (['0', 'f', 'F', 'FALSE', 'false', 'False'].includes(text.trim())) return false;
  return undefined;
}

type Kind = 'string' | 'int' | 'bool' | 'duration' | 'list';

interface Setting {
  /** The Vela flag name (`server.addr`); flags are also accepted kebab-cased and camelCased. */
  flag: string;
  env: string[];
  kind: Kind;
}

/** Every setting: Vela's flag name, its environment variables in precedence order, and its kind. */
export const SETTINGS = {
  workerAddr: { flag: 'worker.addr', env: ['WORKER_ADDR', 'VELA_WORKER_ADDR', 'VELA_WORKER'], kind: 'string' },
  checkIn: { flag: 'checkIn', env: ['WORKER_CHECK_IN', 'VELA_CHECK_IN', 'CHECK_IN'], kind: 'duration' },
  buildLimit: { flag: 'build.limit', env: ['WORKER_BUILD_LIMIT', 'VELA_BUILD_LIMIT', 'BUILD_LIMIT'], kind: 'int' },
  buildTimeout: { flag: 'build.timeout', env: ['WORKER_BUILD_TIMEOUT', 'VELA_BUILD_TIMEOUT', 'BUILD_TIMEOUT'], kind: 'duration' },
  logFormat: { flag: 'log.format', env: ['WORKER_LOG_FORMAT', 'VELA_LOG_FORMAT', 'LOG_FORMAT'], kind: 'string' },
  logLevel: { flag: 'log.level', env: ['WORKER_LOG_LEVEL', 'VELA_LOG_LEVEL', 'LOG_LEVEL'], kind: 'string' },
  serverAddr: { flag: 'server.addr', env: ['WORKER_SERVER_ADDR', 'VELA_SERVER_ADDR', 'VELA_SERVER', 'SERVER_ADDR'], kind: 'string' },
  serverSecret: { flag: 'server.secret', env: ['WORKER_SERVER_SECRET', 'VELA_SERVER_SECRET', 'SERVER_SECRET'], kind: 'string' },
  serverCert: { flag: 'server.cert', env: ['WORKER_SERVER_CERT', 'VELA_SERVER_CERT', 'SERVER_CERT'], kind: 'string' },
  serverCertKey: { flag: 'server.cert-key', env: ['WORKER_SERVER_CERT_KEY', 'VELA_SERVER_CERT_KEY', 'SERVER_CERT_KEY'], kind: 'string' },
  serverTlsMinVersion: { flag: 'server.tls-min-version', env: ['WORKER_SERVER_TLS_MIN_VERSION', 'VELA_SERVER_TLS_MIN_VERSION', 'SERVER_TLS_MIN_VERSION'], kind: 'string' },
  executorDriver: { flag: 'executor.driver', env: ['VELA_EXECUTOR_DRIVER', 'EXECUTOR_DRIVER'], kind: 'string' },
  executorMaxLogSize: { flag: 'executor.max_log_size', env: ['VELA_EXECUTOR_MAX_LOG_SIZE', 'EXECUTOR_MAX_LOG_SIZE'], kind: 'int' },
  logStreamingTimeout: { flag: 'executor.log_streaming_timeout', env: ['WORKER_LOG_STREAMING_TIMEOUT', 'VELA_LOG_STREAMING_TIMEOUT', 'LOG_STREAMING_TIMEOUT'], kind: 'duration' },
  enforceTrustedRepos: { flag: 'executor.enforce-trusted-repos', env: ['VELA_EXECUTOR_ENFORCE_TRUSTED_REPOS', 'EXECUTOR_ENFORCE_TRUSTED_REPOS'], kind: 'bool' },
  outputsImage: { flag: 'executor.outputs-image', env: ['VELA_EXECUTOR_OUTPUTS_IMAGE', 'EXECUTOR_OUTPUTS_IMAGE'], kind: 'string' },
  queueDriver: { flag: 'queue.driver', env: ['VELA_QUEUE_DRIVER', 'QUEUE_DRIVER'], kind: 'string' },
  queueAddr: { flag: 'queue.addr', env: ['VELA_QUEUE_ADDR', 'QUEUE_ADDR'], kind: 'string' },
  queueCluster: { flag: 'queue.cluster', env: ['VELA_QUEUE_CLUSTER', 'QUEUE_CLUSTER'], kind: 'bool' },
  queueRoutes: { flag: 'queue.routes', env: ['VELA_QUEUE_ROUTES', 'QUEUE_ROUTES'], kind: 'list' },
  queuePopTimeout: { flag: 'queue.pop.timeout', env: ['VELA_QUEUE_POP_TIMEOUT', 'QUEUE_POP_TIMEOUT'], kind: 'duration' },
  queuePublicKey: { flag: 'queue.public-key', env: ['VELA_QUEUE_PUBLIC_KEY', 'QUEUE_PUBLIC_KEY'], kind: 'string' },
  runtimeDriver: { flag: 'runtime.driver', env: ['VELA_RUNTIME_DRIVER', 'RUNTIME_DRIVER'], kind: 'string' },
  runtimeConfig: { flag: 'runtime.config', env: ['VELA_RUNTIME_CONFIG', 'RUNTIME_CONFIG'], kind: 'string' },
  runtimeNamespace: { flag: 'runtime.namespace', env: ['VELA_RUNTIME_NAMESPACE', 'RUNTIME_NAMESPACE'], kind: 'string' },
  runtimePodsTemplateName: { flag: 'runtime.pods-template-name', env: ['VELA_RUNTIME_PODS_TEMPLATE_NAME', 'RUNTIME_PODS_TEMPLATE_NAME'], kind: 'string' },
  runtimePodsTemplateFile: { flag: 'runtime.pods-template-file', env: ['VELA_RUNTIME_PODS_TEMPLATE_FILE', 'RUNTIME_PODS_TEMPLATE_FILE'], kind: 'string' },
  runtimePrivilegedImages: { flag: 'runtime.privileged-images', env: ['VELA_RUNTIME_PRIVILEGED_IMAGES', 'RUNTIME_PRIVILEGED_IMAGES'], kind: 'list' },
  runtimeVolumes: { flag: 'runtime.volumes', env: ['VELA_RUNTIME_VOLUMES', 'RUNTIME_VOLUMES'], kind: 'list' },
  runtimeDropCapabilities: { flag: 'runtime.drop-capabilities', env: ['VELA_RUNTIME_DROP_CAPABILITIES', 'RUNTIME_DROP_CAPABILITIES'], kind: 'list' },
  storageFileSizeLimit: { flag: 'storage.file-size-limit', env: ['WORKER_STORAGE_FILE_SIZE_LIMIT', 'VELA_STORAGE_FILE_SIZE_LIMIT', 'STORAGE_FILE_SIZE_LIMIT'], kind: 'int' },
  storageBuildFileSizeLimit: {
    flag: 'storage.build-file-size-limit',
    env: ['WORKER_STORAGE_BUILD_FILE_SIZE_LIMIT', 'VELA_STORAGE_BUILD_FILE_SIZE_LIMIT', 'STORAGE_BUILD_FILE_SIZE_LIMIT'],
    kind: 'int',
  },
} as const satisfies Record<string, Setting>;

/** A setting's name in {@link SETTINGS}. */
export type SettingName = keyof typeof SETTINGS;

const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'warning', 'error', 'fatal', 'panic'] as const;
const DROPPABLE_CAPS = /^CAP_[A-Z_]+$/;

/** Parsed, validated configuration of `berth start`. Durations are in milliseconds. */
export interface StartConfig {
  worker: {
    /** The worker's address as registered (`http://w1:8080`). */
    addr: string;
    /** Its hostname: the worker's identity with the server. */
    hostname: string;
    /** The port the worker's API listens on (from the address; 80 or 443 by default). */
    port: number;
    /** Interval between check-ins, ms. */
    checkInMs: number;
  };
  build: { limit: number; timeoutMs: number };
  log: { format: 'json' | 'text'; level: (typeof LOG_LEVELS)[number] };
  server: { addr: string; secret: string | undefined; cert: string | undefined; certKey: string | undefined; tlsMinVersion: '1.0' | '1.1' | '1.2' | '1.3' };
  executor: { driver: 'linux'; maxLogSize: number; logStreamingTimeoutMs: number; enforceTrustedRepos: boolean; outputsImage: string | undefined };
  queue: {
    driver: 'redis';
    /** Redis URL; undefined: use the one the server reports. */
    addr: string | undefined;
    cluster: boolean;
    /** Routes to register and pop from; empty when the first was `NONE` or `""` (the server's record decides). */
    routes: string[];
    popTimeoutMs: number;
    /** Fallback public key when the server's queue info has none. */
    publicKey: string | undefined;
  };
  runtime: {
    driver: 'docker' | 'kubernetes';
    config: string | undefined;
    namespace: string | undefined;
    podsTemplateName: string | undefined;
    podsTemplateFile: string | undefined;
    privilegedImages: string[];
    volumes: string[];
    dropCapabilities: string[];
  };
  storage: { fileSizeLimitMb: number; buildFileSizeLimitMb: number };
}

/** One problem found in the configuration, naming where the value came from. */
export interface ConfigIssue {
  setting: SettingName | 'config';
  /** `env VELA_BUILD_LIMIT`, `flag --build.limit`, or `default`. */
  source: string;
  message: string;
}

/** The configuration is invalid: `issues` lists every problem, and so does the message. */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  readonly issues: ConfigIssue[];
  constructor(issues: ConfigIssue[]) {
    super(
      `invalid configuration for berth start (${issues.length} problem${issues.length === 1 ? '' : 's'}):\n` +
        issues.map((i) => `  - ${i.setting === 'config' ? '' : `${SETTINGS[i.setting].flag} (${i.source}): `}${i.message}`).join('\n'),
    );
    this.issues = issues;
  }
}

/** Where raw values come from: the environment and parsed flags (by Vela flag name, kebab or camel case). */
export interface ConfigSources {
  env?: Record<string, string | undefined>;
  flags?: Record<string, unknown>;
  /** Used for the default worker address (default: the OS hostname). */
  defaultHostname?: string;
}

function flagAliases(name: SettingName): string[] {
  const flag = SETTINGS[name].flag;
  const kebab = flag.replace(/[._]/g, '-');
  const camel = kebab.replace(/-([a-z])/g, (_m, c: string) => c.toUpperCase());
  return [...new Set([flag, kebab, camel, name])];
}

/** The raw value of a setting and where it came from. */
function lookup(name: SettingName, sources: ConfigSources): { value: unknown; source: string } | undefined {
  for (const alias of flagAliases(name)) {
    const v = sources.flags?.[alias];
    if (v !== undefined) return { value: v, source: `flag --${SETTINGS[name].flag}` };
  }
  for (const env of SETTINGS[name].env) {
    const v = sources.env?.[env];
    if (v !== undefined && v !== '') return { value: v, source: `env ${env}` };
  }
  return undefined;
}

/**
 * Reads and validates `berth start`'s configuration. Throws a {@link ConfigError} listing every
 * problem at once. Differences from go-vela/worker: `queue.driver` defaults to `redis` (the only
 * driver) instead of being required; `/vela/...` file fallbacks and `.env` loading are not done.
 */
export function loadStartConfig(sources: ConfigSources = { env: process.env }): StartConfig {
  const issues: ConfigIssue[] = [];
  const sourceOf: Partial<Record<SettingName, string>> = {};
  const raw: Partial<Record<SettingName, unknown>> = {};

  // Step 1: text → typed values, per kind.
  for (const name of Object.keys(SETTINGS) as SettingName[]) {
    const found = lookup(name, sources);
    if (!found) continue;
    sourceOf[name] = found.source;
    const { kind } = SETTINGS[name];
    const v = found.value;
    const bad = (message: string): void => void issues.push({ setting: name, source: found.source, message });
    switch (kind) {
      case 'string':
        raw[name] = String(v);
        break;
      case 'int': {
        const n = typeof v === 'number' ? v : /^\s*-?\d+\s*$/.test(String(v)) ? Number(v) : NaN;
        if (Number.isSafeInteger(n)) raw[name] = n;
        else bad(`must be a whole number, got ${JSON.stringify(String(v))}`);
        break;
      }
      case 'bool': {
        const b = typeof v === 'boolean' ? v : parseGoBool(String(v));
        if (b === undefined) bad(`must be true or false, got ${JSON.stringify(String(v))}`);
        else raw[name] = b;
        break;
      }
      case 'duration': {
        const ms = typeof v === 'number' ? v : parseGoDuration(String(v));
        if (ms === undefined) bad(`must be a Go duration like 30m, 15s or 1h30m, got ${JSON.stringify(String(v))}`);
        else raw[name] = ms;
        break;
      }
      case 'list': {
        const items = Array.isArray(v) ? v.map(String) : String(v).split(',');
        raw[name] = items.map((s) => s.trim()).filter((s, i, all) => s !== '' || (i === 0 && all.length === 1));
        break;
      }
    }
  }

  // Step 2: defaults and rules, with zod.
  const host = sources.defaultHostname ?? osHostname();
  const positiveMs = (what: string) => z.number().positive(`${what} must be longer than 0`);
  const schema = z
    .object({
      workerAddr: z.string().default(`http://${host}`),
      checkIn: positiveMs('the check-in interval').default(15 * 60_000),
      buildLimit: z.number().int().min(1, 'must be at least 1').max(1000, 'must be at most 1000').default(1),
      buildTimeout: positiveMs('the build timeout').default(30 * 60_000),
      logFormat: z.enum(['json', 'text'], { message: 'must be json or text' }).default('json'),
      logLevel: z.enum(LOG_LEVELS, { message: `must be one of ${LOG_LEVELS.join(', ')}` }).default('info'),
      serverAddr: z.string({ message: 'is required (set VELA_SERVER_ADDR)' }),
      serverSecret: z.string().optional(),
      serverCert: z.string().optional(),
      serverCertKey: z.string().optional(),
      serverTlsMinVersion: z.enum(['1.0', '1.1', '1.2', '1.3'], { message: 'must be 1.0, 1.1, 1.2 or 1.3' }).default('1.2'),
      executorDriver: z.literal('linux', { message: 'must be linux (the only executor)' }).default('linux'),
      executorMaxLogSize: z.number().int().min(0, 'must be 0 (no limit) or a number of bytes').default(0),
      logStreamingTimeout: z.number().min(0, 'must not be negative').default(5 * 60_000),
      enforceTrustedRepos: z.boolean().default(true),
      outputsImage: z.string().optional(),
      queueDriver: z.literal('redis', { message: 'must be redis (the only queue driver)' }).default('redis'),
      queueAddr: z.string().optional(),
      queueCluster: z.boolean().default(false),
      queueRoutes: z.array(z.string()).default(['vela']),
      queuePopTimeout: positiveMs('the pop timeout').default(60_000),
      queuePublicKey: z.string().optional(),
      runtimeDriver: z.enum(['docker', 'kubernetes'], { message: 'must be docker or kubernetes' }).default('docker'),
      runtimeConfig: z.string().optional(),
      runtimeNamespace: z.string().optional(),
      runtimePodsTemplateName: z.string().optional(),
      runtimePodsTemplateFile: z.string().optional(),
      runtimePrivilegedImages: z.array(z.string()).default([]),
      runtimeVolumes: z.array(z.string()).default([]),
      runtimeDropCapabilities: z.array(z.string().regex(DROPPABLE_CAPS, 'capabilities look like CAP_NET_RAW')).default([]),
      storageFileSizeLimit: z.number().int().min(0, 'must not be negative').default(100),
      storageBuildFileSizeLimit: z.number().int().min(0, 'must not be negative').default(500),
    });

  type Shape = z.infer<typeof schema>;
  // Cross-field checks run on every value that parsed, even when others did not, so that one
  // message lists every problem (a zod refinement would only run once the whole object parsed).
  const crossCheck = (c: Partial<Shape>, ctx: { addIssue(issue: { code: 'custom'; path: string[]; message: string }): void }): void => {
    const url = (name: 'workerAddr' | 'serverAddr' | 'queueAddr', value: string | undefined, schemes: string[]): URL | undefined => {
      if (value === undefined) return undefined;
      if (!value.includes('://')) ctx.addIssue({ code: 'custom', path: [name], message: `must be a full URL with a scheme (${schemes.join(', ')}://…), got ${JSON.stringify(value)}` });
      else if (value.endsWith('/')) ctx.addIssue({ code: 'custom', path: [name], message: `must not end with a trailing slash, got ${JSON.stringify(value)}` });
      else {
        try {
          const u = new URL(value);
          if (!schemes.includes(u.protocol.replace(/:$/, ''))) ctx.addIssue({ code: 'custom', path: [name], message: `must use ${schemes.join(' or ')}, got ${u.protocol}` });
          else return u;
        } catch {
          ctx.addIssue({ code: 'custom', path: [name], message: `is not a valid URL: ${JSON.stringify(value)}` });
        }
      }
      return undefined;
    };
    const worker = url('workerAddr', c.workerAddr, ['http', 'https']);
    url('serverAddr', c.serverAddr, ['http', 'https']);
    if (c.queueCluster && c.queueAddr !== undefined) {
      // A Sentinel address (server queue/redis/redis.go): redis://[master,sentinel:26379,…].
      try {
        parseSentinelUrl(c.queueAddr);
      } catch (e) {
        ctx.addIssue({ code: 'custom', path: ['queueAddr'], message: e instanceof Error ? e.message : String(e) });
      }
    } else url('queueAddr', c.queueAddr, ['redis', 'rediss']);
    if (worker?.protocol === 'https:' && (!c.serverCert || !c.serverCertKey)) {
      ctx.addIssue({ code: 'custom', path: ['serverCert'], message: 'a certificate and its key (server.cert, server.cert-key) are required when worker.addr is https' });
    }
    if (c.queuePublicKey !== undefined && Buffer.from(c.queuePublicKey, 'base64').length !== 32) {
      ctx.addIssue({ code: 'custom', path: ['queuePublicKey'], message: 'must be the base64 of a 32-byte Ed25519 public key' });
    }
    if (c.runtimePodsTemplateName && c.runtimePodsTemplateFile) {
      ctx.addIssue({ code: 'custom', path: ['runtimePodsTemplateFile'], message: 'set either runtime.pods-template-name or runtime.pods-template-file, not both' });
    }
  };

  const parsed = schema.safeParse(raw);
  const partial: Partial<Record<string, unknown>> = {};
  for (const [key, field] of Object.entries(schema.shape)) {
    const r = (field as z.ZodType).safeParse(raw[key as SettingName]);
    if (r.success) partial[key] = r.data;
  }
  const crossIssues: Array<{ path: string[]; message: string }> = [];
  crossCheck(partial, { addIssue: (i) => void crossIssues.push(i) });
  const zodIssues = [...(parsed.success ? [] : parsed.error.issues), ...crossIssues];
  for (const issue of zodIssues) {
    const setting = (issue.path[0] as SettingName | undefined) ?? 'config';
    if (issues.some((i) => i.setting === setting)) continue; // already reported
    issues.push({ setting, source: setting === 'config' ? 'config' : (sourceOf[setting] ?? 'default'), message: issue.message });
  }
  if (issues.length > 0 || !parsed.success) throw new ConfigError(issues);
  const c = parsed.data;
  const worker = new URL(c.workerAddr);
  const routes = c.queueRoutes[0] === 'NONE' || c.queueRoutes[0] === '' ? [] : c.queueRoutes;
  return {
    worker: {
      addr: c.workerAddr,
      hostname: worker.hostname,
      port: worker.port ? Number(worker.port) : worker.protocol === 'https:' ? 443 : 80,
      checkInMs: c.checkIn,
    },
    build: { limit: c.buildLimit, timeoutMs: c.buildTimeout },
    log: { format: c.logFormat, level: c.logLevel },
    server: { addr: c.serverAddr, secret: c.serverSecret || undefined, cert: c.serverCert, certKey: c.serverCertKey, tlsMinVersion: c.serverTlsMinVersion },
    executor: { driver: c.executorDriver, maxLogSize: c.executorMaxLogSize, logStreamingTimeoutMs: c.logStreamingTimeout, enforceTrustedRepos: c.enforceTrustedRepos, outputsImage: c.outputsImage || undefined },
    queue: { driver: c.queueDriver, addr: c.queueAddr || undefined, cluster: c.queueCluster, routes, popTimeoutMs: c.queuePopTimeout, publicKey: c.queuePublicKey || undefined },
    runtime: {
      driver: c.runtimeDriver,
      config: c.runtimeConfig || undefined,
      namespace: c.runtimeNamespace || undefined,
      podsTemplateName: c.runtimePodsTemplateName || undefined,
      podsTemplateFile: c.runtimePodsTemplateFile || undefined,
      privilegedImages: c.runtimePrivilegedImages,
      volumes: c.runtimeVolumes,
      dropCapabilities: c.runtimeDropCapabilities,
    },
    storage: { fileSizeLimitMb: c.storageFileSizeLimit, buildFileSizeLimitMb: c.storageBuildFileSizeLimit },
  };
}
