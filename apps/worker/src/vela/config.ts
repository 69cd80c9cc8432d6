/**
 * Configuration of `berth start`: the settings table (config/table.ts) read from flags, Vela's
 * environment variables, a `.env` file, a `--config` file and the `/vela/...` file fallbacks,
 * then checked across settings, with one error listing every problem.
 */
import { hostname as osHostname } from 'node:os';
import { parseSentinelUrl } from './sentinel-url.ts';
import path from 'node:path';
import { parseGoDuration } from '@berth/context';
import { type ConfigIssue, type ConfigSources, type SettingValues, ConfigError, resolveSettings } from '../config/resolve.ts';
import { defaultStateDir } from '../config/state-dir.ts';
import { type SettingName, SETTINGS } from '../config/table.ts';
import { type LogLevel, pairsOf } from '../config/values.ts';

export { ConfigError, SETTINGS, parseGoDuration };

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
  log: { format: 'json' | 'text'; level: LogLevel };
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

/** Resource limits of every container (Berth extension; Vela has none): undefined fields are unlimited. */
interface ContainerLimits {
  cpus?: number | undefined;
  memoryBytes?: number | undefined;
  pidsLimit?: number | undefined;
}

/** Settings of `berth start` beyond Vela's. */
export interface StartExtras {
  drainGraceMs: number;
  stopGraceMs: number;
  listen: { host: string; port: number } | undefined;
  stateDir: string;
  serverTimeoutMs: number;
  pauseImage: string | undefined;
  containerLimits: ContainerLimits;
  /** `--runtime-plugin`: a plugin to load instead of the driver's built-in runtime. */
  runtimePlugin: string | undefined;
  /** `--runtime-option key=value` pairs for that plugin (or the built-in runtime). */
  runtimeOptions: Record<string, string>;
}

/** Sources of `berth start`'s configuration. */
export interface StartSources extends ConfigSources {
  /** Used for the default worker address (default: the OS hostname). */
  defaultHostname?: string;
  /** Relative paths resolve against it (default: the process's). */
  cwd?: string;
}

/** What {@link readStartConfig} returns: the configuration, and each value with its source (for `--check-config`). */
export interface StartConfigRead {
  config: StartConfig;
  extras: StartExtras;
  values: SettingValues;
  sourceOf: Partial<Record<SettingName, string>>;
}

type Check = (name: SettingName, message: string) => void;

/** Rules across settings, and URL shapes (cmd/vela-worker/flags.go worker.addr and queue/flags.go queue.addr Actions, validate.go). */
function crossCheck(v: SettingValues, problem: Check): void {
  const url = (name: 'workerAddr' | 'serverAddr' | 'queueAddr', value: string | undefined, schemes: string[]): URL | undefined => {
    if (value === undefined) return undefined;
    if (!value.includes('://')) problem(name, `must be a full URL with a scheme (${schemes.join(', ')}://…), got ${JSON.stringify(value)}`);
    else if (value.endsWith('/')) problem(name, `must not end with a trailing slash, got ${JSON.stringify(value)}`);
    else {
      try {
        const u = new URL(value);
        if (schemes.includes(u.protocol.replace(/:$/, ''))) return u;
        problem(name, `must use ${schemes.join(' or ')}, got ${u.protocol}`);
      } catch {
        problem(name, `is not a valid URL: ${JSON.stringify(value)}`);
      }
    }
    return undefined;
  };
  const worker = url('workerAddr', v.workerAddr, ['http', 'https']);
  url('serverAddr', v.serverAddr, ['http', 'https']);
  if (v.queueCluster && v.queueAddr) {
    // A Sentinel address (go-vela/server queue/redis/redis.go): redis://[master,sentinel:26379,…].
    try {
      parseSentinelUrl(v.queueAddr);
    } catch (e) {
      problem('queueAddr', e instanceof Error ? e.message : String(e));
    }
  } else url('queueAddr', v.queueAddr || undefined, ['redis', 'rediss']);
  if (worker?.protocol === 'https:' && (!v.serverCert || !v.serverCertKey)) {
    problem('serverCert', 'a certificate and its key (server.cert, server.cert-key) are required when worker.addr is https');
  }
  // S queue/redis/opts.go WithPrivateKey: an empty key is allowed (the queue cannot sign); else it
  // must be standard base64 of something. go-vela/worker sets its queue up with it (and fails when
  // it is bad) though a worker never signs.
  if (v.queuePrivateKey && !isStdBase64(v.queuePrivateKey)) problem('queuePrivateKey', 'must be a base64 (standard, padded) queue signing private key');
  if (v.queuePublicKey && Buffer.from(v.queuePublicKey, 'base64').length !== 32)
    problem('queuePublicKey', 'must be the base64 of a 32-byte Ed25519 public key');
  if (v.runtimePodsTemplateName && v.runtimePodsTemplateFile)
    problem('runtimePodsTemplateFile', 'set either runtime.pods-template-name or runtime.pods-template-file, not both');
  checkContainerLimits(v, problem);
}

/**
 * Container limits need a runtime that applies them: the Docker runtime does (HostConfig NanoCpus,
 * Memory, PidsLimit); the Kubernetes runtime takes resources from the pods template instead.
 */
export function checkContainerLimits(v: SettingValues, problem: Check): void {
  if (v.runtimeDriver !== 'kubernetes') return;
  for (const name of ['containerCpus', 'containerMemory', 'containerPids'] as const) {
    if (v[name] !== undefined)
      problem(name, 'the kubernetes runtime does not apply container limits; set resources in the pods template (runtime.pods-template-file) instead');
  }
}

/**
 * Reads and validates `berth start`'s configuration. Throws a {@link ConfigError} listing every
 * problem at once. Differences from go-vela/worker: `queue.driver` defaults to `redis` (the only
 * driver) instead of being required; an unknown log level or format is refused instead of falling
 * back to info/json; an empty variable counts as unset (Go reads an empty boolean as false).
 */
export function readStartConfig(sources: StartSources = { env: process.env }): StartConfigRead {
  const resolved = resolveSettings('start', sources);
  const issues: ConfigIssue[] = [...resolved.issues];
  const v = resolved.values;
  const problem: Check = (name, message) => {
    if (!issues.some((i) => i.setting === name)) issues.push({ setting: name, source: resolved.sourceOf[name] ?? 'default', message });
  };
  if (v.serverAddr === undefined && !issues.some((i) => i.setting === 'serverAddr')) problem('serverAddr', 'is required (set VELA_SERVER_ADDR)');
  const host = sources.defaultHostname ?? (osHostname() || 'localhost');
  v.workerAddr ??= issues.some((i) => i.setting === 'workerAddr') ? undefined : `http://${host}`;
  crossCheck(v, problem);
  if (issues.length > 0) throw new ConfigError(issues, 'start');

  const worker = new URL(v.workerAddr!);
  const routes = v.queueRoutes![0] === 'NONE' || v.queueRoutes![0] === '' ? [] : v.queueRoutes!;
  const cwd = sources.cwd ?? process.cwd();
  const config: StartConfig = {
    worker: {
      addr: v.workerAddr!,
      hostname: worker.hostname,
      port: worker.port ? Number(worker.port) : worker.protocol === 'https:' ? 443 : 80,
      checkInMs: v.checkIn!,
    },
    build: { limit: v.buildLimit!, timeoutMs: v.buildTimeout! },
    log: { format: v.logFormat!, level: v.logLevel! },
    server: {
      addr: v.serverAddr!,
      secret: v.serverSecret || undefined,
      cert: v.serverCert,
      certKey: v.serverCertKey,
      tlsMinVersion: v.serverTlsMinVersion as StartConfig['server']['tlsMinVersion'],
    },
    executor: {
      driver: 'linux',
      maxLogSize: v.executorMaxLogSize!,
      logStreamingTimeoutMs: v.logStreamingTimeout!,
      enforceTrustedRepos: v.enforceTrustedRepos!,
      outputsImage: v.outputsImage || undefined,
    },
    queue: {
      driver: 'redis',
      addr: v.queueAddr || undefined,
      cluster: v.queueCluster!,
      routes,
      popTimeoutMs: v.queuePopTimeout!,
      publicKey: v.queuePublicKey || undefined,
    },
    runtime: {
      driver: v.runtimeDriver as StartConfig['runtime']['driver'],
      config: v.runtimeConfig || undefined,
      namespace: v.runtimeNamespace || undefined,
      podsTemplateName: v.runtimePodsTemplateName || undefined,
      podsTemplateFile: v.runtimePodsTemplateFile || undefined,
      privilegedImages: v.runtimePrivilegedImages ?? [],
      volumes: v.runtimeVolumes ?? [],
      dropCapabilities: v.runtimeDropCapabilities ?? [],
    },
    storage: { fileSizeLimitMb: v.storageFileSizeLimit!, buildFileSizeLimitMb: v.storageBuildFileSizeLimit! },
  };
  const extras: StartExtras = {
    drainGraceMs: v.drainGrace!,
    stopGraceMs: v.stopGrace!,
    listen: v.listen,
    stateDir: path.resolve(cwd, v.stateDir ?? defaultStateDir(sources.env ?? {})),
    serverTimeoutMs: v.serverTimeout!,
    pauseImage: resolved.sourceOf.pauseImage === 'default' ? undefined : v.pauseImage,
    containerLimits: { cpus: v.containerCpus, memoryBytes: v.containerMemory, pidsLimit: v.containerPids },
    runtimePlugin: v.runtimePlugin || undefined,
    runtimeOptions: pairsOf(v.runtimeOptions ?? []),
  };
  return { config, extras, values: v, sourceOf: resolved.sourceOf };
}

/** Reads and validates `berth start`'s Vela configuration; see {@link readStartConfig}. */
export function loadStartConfig(sources: StartSources = { env: process.env }): StartConfig {
  return readStartConfig(sources).config;
}

/** Whether `text` is non-empty standard padded base64, as Go's base64.StdEncoding decodes it (line breaks ignored). */
function isStdBase64(text: string): boolean {
  const compact = text.replace(/[\r\n]/g, '');
  return compact.length > 0 && compact.length % 4 === 0 && /^[A-Za-z0-9+/]+={0,2}$/.test(compact) && Buffer.from(compact, 'base64').length > 0;
}
