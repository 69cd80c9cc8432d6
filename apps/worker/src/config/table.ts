/**
 * Every setting of `berth start` and `berth exec`, in one declarative table: its flag and the
 * other spellings accepted, its environment variables, its `/vela/...` file fallback, its type,
 * default, help group and help. Parsing, precedence, help and `--check-config` are all derived
 * from it (see resolve.ts, options.ts).
 *
 * The Vela settings follow go-vela/worker 8ae8b6f: cmd/vela-worker/flags.go `flags()`,
 * executor/flags.go and runtime/flags.go `Flags`, and go-vela/server 1f1a252 queue/flags.go `Flags`
 * (appended to the worker's flags). To add a setting: add an entry here, then read it where it
 * is used (vela/config.ts `loadStartConfig` for `berth start`, exec-config.ts for `berth exec`).
 */
import type { ValueType } from './values.ts';

/** The commands that read settings from the table. */
export type ConfigCommand = 'start' | 'exec';

/** Help groups of `berth start --help` and `berth exec --help`, in display order. */
export const HELP_GROUPS = ['Worker', 'Vela server', 'Builds', 'Queue', 'Runtime', 'Container limits (Berth extension)', 'Logging', 'Berth'] as const;
/** A help group. */
type HelpGroup = (typeof HELP_GROUPS)[number];

/** One setting. */
export interface SettingSpec {
  /** The long flag shown in help, kebab-case (`build-limit`). */
  readonly flag: string;
  /** go-vela/worker's flag name (`build.limit`, `checkIn`); also accepted as a flag and a config-file key. */
  readonly vela?: string;
  /** More flag spellings accepted and not shown (`kubeconfig` for `runtime-config`). */
  readonly aliases?: readonly string[];
  /** A one-letter flag (`r`). */
  readonly short?: string;
  /** Environment variables, the first set wins (as urfave/cli's `EnvVars` chain). */
  readonly env: readonly string[];
  /** go-vela's `cli.File` fallback, read when neither a flag, a variable nor the config file sets it. */
  readonly file?: string;
  readonly type: ValueType;
  /** The default, written as a user would write it (parsed like any input). */
  readonly default?: string;
  /** How help shows a default computed at run time (`http://<hostname>`). */
  readonly defaultHelp?: string;
  readonly help: string;
  readonly group: HelpGroup;
  readonly commands: readonly ConfigCommand[];
  /** Accepted for compatibility but hidden from help: why (`not supported by Berth yet`). */
  readonly hidden?: string;
  /** Redacted by `--check-config`. */
  readonly secret?: boolean;
  /** Allowed values (compared after the type's normalisation). */
  readonly oneOf?: readonly string[];
  /** Numbers and durations (ms): the smallest and largest allowed. */
  readonly min?: number;
  readonly max?: number;
  /** Strings and list items: a pattern and what it means. */
  readonly pattern?: readonly [RegExp, string];
  /** What differs under `berth exec`. */
  /**
   * How `berth exec` differs: other variables, another default, or (`anyValue`) no `oneOf` check
   * because exec checks the value itself (a runtime plugin's name or path).
   */
  readonly exec?: { readonly env?: readonly string[]; readonly default?: string; readonly anyValue?: boolean };
}

const both = ['start', 'exec'] as const;
const start = ['start'] as const;
const execOnly = ['exec'] as const;
const DNS_LABEL: readonly [RegExp, string] = [/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/, 'a Kubernetes namespace name (lower-case letters, digits and -)'];

/** The table. Keys are the settings' names in code. */
export const SETTINGS = {
  // ── cmd/vela-worker/flags.go ──────────────────────────────────────────────────────────────
  workerAddr: {
    flag: 'worker-addr',
    vela: 'worker.addr',
    env: ['WORKER_ADDR', 'VELA_WORKER_ADDR', 'VELA_WORKER'],
    type: 'string',
    defaultHelp: 'http://<hostname>',
    help: 'the address the server reaches this worker at; its host is the worker id, its port the API port',
    group: 'Worker',
    commands: start,
  },
  checkIn: {
    flag: 'check-in',
    vela: 'checkIn',
    env: ['WORKER_CHECK_IN', 'VELA_CHECK_IN', 'CHECK_IN'],
    type: 'duration',
    default: '15m',
    min: 1e-6,
    help: 'interval between check-ins with the server',
    group: 'Worker',
    commands: start,
  },
  buildLimit: {
    flag: 'build-limit',
    vela: 'build.limit',
    env: ['WORKER_BUILD_LIMIT', 'VELA_BUILD_LIMIT', 'BUILD_LIMIT'],
    type: 'int',
    default: '1',
    min: 1,
    max: 1000,
    help: 'builds run at once (build slots)',
    group: 'Builds',
    commands: start,
  },
  buildTimeout: {
    flag: 'build-timeout',
    vela: 'build.timeout',
    aliases: ['timeout'],
    short: 't',
    env: ['WORKER_BUILD_TIMEOUT', 'VELA_BUILD_TIMEOUT', 'BUILD_TIMEOUT'],
    type: 'duration',
    default: '30m',
    min: 1e-6,
    help: "the build timeout, a Go duration (90s, 30m, 1h); under start a repo's own timeout (minutes) wins",
    group: 'Builds',
    commands: both,
    exec: { env: ['BERTH_TIMEOUT', 'VELA_BUILD_TIMEOUT'] },
  },
  buildNumber: {
    flag: 'build-number',
    env: ['BERTH_BUILD_NUMBER'],
    type: 'int',
    default: '1',
    min: 1,
    max: Number.MAX_SAFE_INTEGER,
    help: 'the local build number in container, network and volume names (localOrg_localRepo_<n>); give concurrent runs on one engine different numbers',
    group: 'Builds',
    commands: execOnly,
  },
  storageFileSizeLimit: {
    flag: 'storage-file-size-limit',
    vela: 'storage.file-size-limit',
    env: ['WORKER_STORAGE_FILE_SIZE_LIMIT', 'VELA_STORAGE_FILE_SIZE_LIMIT', 'STORAGE_FILE_SIZE_LIMIT'],
    type: 'int',
    default: '100',
    min: 0,
    help: 'artifact file size limit in MB',
    group: 'Builds',
    commands: start,
    hidden: 'artifacts are not supported by Berth yet',
  },
  storageBuildFileSizeLimit: {
    flag: 'storage-build-file-size-limit',
    vela: 'storage.build-file-size-limit',
    env: ['WORKER_STORAGE_BUILD_FILE_SIZE_LIMIT', 'VELA_STORAGE_BUILD_FILE_SIZE_LIMIT', 'STORAGE_BUILD_FILE_SIZE_LIMIT'],
    type: 'int',
    default: '500',
    min: 0,
    help: 'artifact size limit per build in MB',
    group: 'Builds',
    commands: start,
    hidden: 'artifacts are not supported by Berth yet',
  },
  logFormat: {
    flag: 'log-format',
    vela: 'log.format',
    env: ['WORKER_LOG_FORMAT', 'VELA_LOG_FORMAT', 'LOG_FORMAT'],
    type: 'logFormat',
    default: 'json',
    help: "Berth's own log: json or text (Go's spellings: j, JSON, t, Text …)",
    group: 'Logging',
    commands: start,
  },
  logLevel: {
    flag: 'log-level',
    vela: 'log.level',
    env: ['WORKER_LOG_LEVEL', 'VELA_LOG_LEVEL', 'LOG_LEVEL'],
    type: 'logLevel',
    default: 'info',
    help: "Berth's own log level: trace, debug, info, warn, error, fatal, panic, silent (Go's spellings: d, DEBUG, Info …)",
    group: 'Logging',
    commands: both,
    exec: { env: ['BERTH_LOG_LEVEL'], default: 'warn' },
  },
  serverAddr: {
    flag: 'server-addr',
    vela: 'server.addr',
    env: ['WORKER_SERVER_ADDR', 'VELA_SERVER_ADDR', 'VELA_SERVER', 'SERVER_ADDR'],
    type: 'string',
    defaultHelp: 'required',
    help: 'the Vela server address',
    group: 'Vela server',
    commands: start,
  },
  serverSecret: {
    flag: 'server-secret',
    vela: 'server.secret',
    env: ['WORKER_SERVER_SECRET', 'VELA_SERVER_SECRET', 'SERVER_SECRET'],
    type: 'string',
    secret: true,
    help: "the server's VELA_SECRET; without it, register with POST /register",
    group: 'Vela server',
    commands: start,
  },
  serverCert: {
    flag: 'server-cert',
    vela: 'server.cert',
    env: ['WORKER_SERVER_CERT', 'VELA_SERVER_CERT', 'SERVER_CERT'],
    type: 'string',
    help: 'TLS certificate file for an https worker address',
    group: 'Worker',
    commands: start,
  },
  serverCertKey: {
    flag: 'server-cert-key',
    vela: 'server.cert-key',
    env: ['WORKER_SERVER_CERT_KEY', 'VELA_SERVER_CERT_KEY', 'SERVER_CERT_KEY'],
    type: 'string',
    help: 'TLS key file for an https worker address',
    group: 'Worker',
    commands: start,
  },
  serverTlsMinVersion: {
    flag: 'server-tls-min-version',
    vela: 'server.tls-min-version',
    env: ['WORKER_SERVER_TLS_MIN_VERSION', 'VELA_SERVER_TLS_MIN_VERSION', 'SERVER_TLS_MIN_VERSION'],
    type: 'string',
    default: '1.2',
    oneOf: ['1.0', '1.1', '1.2', '1.3'],
    help: 'minimum TLS version of the worker API',
    group: 'Worker',
    commands: start,
  },
  // ── executor/flags.go ─────────────────────────────────────────────────────────────────────
  executorDriver: {
    flag: 'executor-driver',
    vela: 'executor.driver',
    env: ['VELA_EXECUTOR_DRIVER', 'EXECUTOR_DRIVER'],
    file: '/vela/executor/driver',
    type: 'string',
    default: 'linux',
    oneOf: ['linux'],
    help: 'executor (linux, the only one)',
    group: 'Builds',
    commands: start,
  },
  executorMaxLogSize: {
    flag: 'executor-max-log-size',
    vela: 'executor.max_log_size',
    env: ['VELA_EXECUTOR_MAX_LOG_SIZE', 'EXECUTOR_MAX_LOG_SIZE'],
    file: '/vela/executor/max_log_size',
    type: 'uint',
    default: '0',
    // 0: no `logs.limits` for the executor (daemon/slot-runner.ts), so its default LogCap applies
    // (packages/executor log/cap.ts). Vela's 0 means no limit (W executor/linux/step.go StreamStep).
    help: "bytes kept and uploaded per step log (the head, a marker, then a rolling tail of the last lines); 0: Berth's default cap of 16 MiB with a 1 MiB tail",
    group: 'Builds',
    commands: start,
  },
  logStreamingTimeout: {
    flag: 'executor-log-streaming-timeout',
    vela: 'executor.log_streaming_timeout',
    env: ['WORKER_LOG_STREAMING_TIMEOUT', 'VELA_LOG_STREAMING_TIMEOUT', 'LOG_STREAMING_TIMEOUT'],
    type: 'duration',
    default: '5m',
    min: 0,
    help: 'how long log streams may outlive a finished or canceled build',
    group: 'Builds',
    commands: start,
  },
  enforceTrustedRepos: {
    flag: 'executor-enforce-trusted-repos',
    vela: 'executor.enforce-trusted-repos',
    env: ['VELA_EXECUTOR_ENFORCE_TRUSTED_REPOS', 'EXECUTOR_ENFORCE_TRUSTED_REPOS'],
    file: '/vela/executor/enforce_trusted_repos',
    type: 'bool',
    default: 'true',
    help: 'only trusted repos may run privileged images',
    group: 'Builds',
    commands: start,
  },
  outputsImage: {
    flag: 'executor-outputs-image',
    vela: 'executor.outputs-image',
    env: ['VELA_EXECUTOR_OUTPUTS_IMAGE', 'EXECUTOR_OUTPUTS_IMAGE'],
    file: '/vela/executor/outputs_image',
    type: 'string',
    help: "turns Vela outputs on when set: files a step writes to /vela/outputs become later steps' environment (Berth reads them without running this image)",
    group: 'Builds',
    commands: start,
  },
  // ── go-vela/server queue/flags.go ─────────────────────────────────────────────────────────
  queueDriver: {
    flag: 'queue-driver',
    vela: 'queue.driver',
    env: ['VELA_QUEUE_DRIVER', 'QUEUE_DRIVER'],
    file: '/vela/queue/driver',
    type: 'string',
    default: 'redis',
    oneOf: ['redis'],
    help: 'queue driver (redis only)',
    group: 'Queue',
    commands: start,
  },
  queueAddr: {
    flag: 'queue-addr',
    vela: 'queue.addr',
    env: ['VELA_QUEUE_ADDR', 'QUEUE_ADDR'],
    file: '/vela/queue/addr',
    type: 'string',
    secret: true,
    defaultHelp: 'the address the server reports',
    help: 'Redis URL (redis:// or rediss://)',
    group: 'Queue',
    commands: start,
  },
  queueCluster: {
    flag: 'queue-cluster',
    vela: 'queue.cluster',
    env: ['VELA_QUEUE_CLUSTER', 'QUEUE_CLUSTER'],
    file: '/vela/queue/cluster',
    type: 'bool',
    default: 'false',
    help: 'the queue address names Redis Sentinels: redis://[master,sentinel:26379,…]',
    group: 'Queue',
    commands: start,
  },
  queueRoutes: {
    flag: 'queue-routes',
    vela: 'queue.routes',
    env: ['VELA_QUEUE_ROUTES', 'QUEUE_ROUTES'],
    file: '/vela/queue/routes',
    type: 'list',
    default: 'vela',
    help: 'routes (Redis lists) to pop, comma-separated or repeated; NONE: those the server has on record',
    group: 'Queue',
    commands: start,
  },
  queuePopTimeout: {
    flag: 'queue-pop-timeout',
    vela: 'queue.pop.timeout',
    env: ['VELA_QUEUE_POP_TIMEOUT', 'QUEUE_POP_TIMEOUT'],
    file: '/vela/queue/pop_timeout',
    type: 'duration',
    default: '60s',
    min: 1e-6,
    help: 'BLPOP timeout',
    group: 'Queue',
    commands: start,
  },
  queuePrivateKey: {
    flag: 'queue-private-key',
    vela: 'queue.private-key',
    env: ['VELA_QUEUE_PRIVATE_KEY', 'QUEUE_PRIVATE_KEY'],
    // S queue/flags.go: cli.EnvVar ×2, then cli.File("/vela/signing.key").
    file: '/vela/signing.key',
    type: 'string',
    secret: true,
    help: "queue signing private key (base64); checked as go-vela's queue checks it, not used (a worker only verifies items)",
    group: 'Queue',
    commands: start,
  },
  queuePublicKey: {
    flag: 'queue-public-key',
    vela: 'queue.public-key',
    env: ['VELA_QUEUE_PUBLIC_KEY', 'QUEUE_PUBLIC_KEY'],
    file: '/vela/signing.pub',
    type: 'string',
    help: "queue public key (base64) when the server's queue info has none",
    group: 'Queue',
    commands: start,
  },
  // ── runtime/flags.go ──────────────────────────────────────────────────────────────────────
  runtimeDriver: {
    flag: 'runtime-driver',
    vela: 'runtime.driver',
    aliases: ['runtime'],
    short: 'r',
    env: ['VELA_RUNTIME_DRIVER', 'RUNTIME_DRIVER'],
    file: '/vela/runtime/driver',
    type: 'string',
    default: 'docker',
    oneOf: ['docker', 'kubernetes'],
    help: 'where containers run: docker or kubernetes (berth exec also takes host, an installed runtime plugin package or a path to a plugin module; `berth runtimes` lists them); --runtime is the same flag',
    group: 'Runtime',
    commands: both,
    exec: { env: ['BERTH_RUNTIME', 'VELA_RUNTIME_DRIVER'], anyValue: true },
  },
  runtimeConfig: {
    flag: 'runtime-config',
    vela: 'runtime.config',
    aliases: ['kubeconfig'],
    env: ['VELA_RUNTIME_CONFIG', 'RUNTIME_CONFIG'],
    file: '/vela/runtime/config',
    type: 'path',
    defaultHelp: '$KUBECONFIG, ~/.kube/config or in-cluster',
    help: 'kubernetes: the kubeconfig file',
    group: 'Runtime',
    commands: both,
    exec: { env: ['VELA_RUNTIME_CONFIG'] },
  },
  runtimeNamespace: {
    flag: 'runtime-namespace',
    vela: 'runtime.namespace',
    aliases: ['namespace'],
    env: ['VELA_RUNTIME_NAMESPACE', 'RUNTIME_NAMESPACE'],
    file: '/vela/runtime/namespace',
    type: 'string',
    defaultHelp: "the kubeconfig context's, else default",
    pattern: DNS_LABEL,
    help: 'kubernetes: the namespace of build pods',
    group: 'Runtime',
    commands: both,
    exec: { env: ['BERTH_NAMESPACE', 'VELA_RUNTIME_NAMESPACE'] },
  },
  runtimePodsTemplateName: {
    flag: 'runtime-pods-template-name',
    vela: 'runtime.pods-template-name',
    env: ['VELA_RUNTIME_PODS_TEMPLATE_NAME', 'RUNTIME_PODS_TEMPLATE_NAME'],
    file: '/vela/runtime/pods_template_name',
    type: 'string',
    help: 'kubernetes: a PipelinePodsTemplate resource name',
    group: 'Runtime',
    commands: start,
  },
  runtimePodsTemplateFile: {
    flag: 'runtime-pods-template-file',
    vela: 'runtime.pods-template-file',
    env: ['VELA_RUNTIME_PODS_TEMPLATE_FILE', 'RUNTIME_PODS_TEMPLATE_FILE'],
    file: '/vela/runtime/pods_template_file',
    type: 'path',
    help: 'kubernetes: a PipelinePodsTemplate YAML file',
    group: 'Runtime',
    commands: start,
  },
  runtimePrivilegedImages: {
    flag: 'runtime-privileged-images',
    vela: 'runtime.privileged-images',
    env: ['VELA_RUNTIME_PRIVILEGED_IMAGES', 'RUNTIME_PRIVILEGED_IMAGES'],
    file: '/vela/runtime/privileged_images',
    type: 'list',
    help: 'images allowed to run privileged',
    group: 'Runtime',
    commands: start,
  },
  runtimeVolumes: {
    flag: 'runtime-volumes',
    vela: 'runtime.volumes',
    env: ['VELA_RUNTIME_VOLUMES', 'RUNTIME_VOLUMES'],
    file: '/vela/runtime/volumes',
    type: 'list',
    help: 'host volumes steps may mount (src:dst[:ro|rw])',
    group: 'Runtime',
    commands: start,
  },
  runtimeDropCapabilities: {
    flag: 'runtime-drop-capabilities',
    vela: 'runtime.drop-capabilities',
    env: ['VELA_RUNTIME_DROP_CAPABILITIES', 'RUNTIME_DROP_CAPABILITIES'],
    file: '/vela/runtime/drop_capabilities',
    type: 'list',
    pattern: [/^CAP_[A-Z_]+$/, 'capabilities look like CAP_NET_RAW'],
    help: 'docker: capabilities dropped from every container',
    group: 'Runtime',
    commands: start,
  },
  // ── Berth's own settings ──────────────────────────────────────────────────────────────────
  runtimePlugin: {
    flag: 'runtime-plugin',
    env: ['BERTH_RUNTIME_PLUGIN'],
    type: 'string',
    defaultHelp: 'runtime.driver',
    help: 'run builds on a runtime plugin instead: host, an installed package name or a path to its module (`berth runtimes` lists them); runtime.driver is still what the server is told',
    group: 'Runtime',
    commands: start,
  },
  runtimeOptions: {
    flag: 'runtime-option',
    env: ['BERTH_RUNTIME_OPTIONS'],
    type: 'pairs',
    pattern: [/^[^=\s]+=/, 'options look like key=value'],
    help: 'an option for the runtime plugin, key=value (repeatable; in BERTH_RUNTIME_OPTIONS comma-separated), e.g. namespace=ci or inheritEnv=PATH,HOME',
    group: 'Runtime',
    commands: both,
  },
  pauseImage: {
    flag: 'kubernetes-pause-image',
    env: ['BERTH_KUBERNETES_PAUSE_IMAGE'],
    type: 'string',
    default: 'kubernetes/pause:latest',
    help: 'kubernetes: the image containers start on',
    group: 'Runtime',
    commands: both,
  },
  containerCpus: {
    flag: 'container-cpus',
    env: ['BERTH_CONTAINER_CPUS'],
    type: 'cpus',
    defaultHelp: 'no limit',
    help: 'CPUs each container may use (1.5); docker only',
    group: 'Container limits (Berth extension)',
    commands: both,
  },
  containerMemory: {
    flag: 'container-memory',
    env: ['BERTH_CONTAINER_MEMORY'],
    type: 'bytes',
    defaultHelp: 'no limit',
    help: "memory each container may use (512m, 2g: Docker's units, 1024-based); docker only",
    group: 'Container limits (Berth extension)',
    commands: both,
  },
  containerPids: {
    flag: 'container-pids',
    env: ['BERTH_CONTAINER_PIDS'],
    type: 'int',
    min: 1,
    defaultHelp: 'no limit',
    help: 'processes each container may run; docker only',
    group: 'Container limits (Berth extension)',
    commands: both,
  },
  stopGrace: {
    flag: 'stop-grace',
    env: ['BERTH_STOP_GRACE'],
    type: 'duration',
    default: '10s',
    min: 0,
    help: 'SIGTERM to SIGKILL for the containers of a canceled build',
    group: 'Berth',
    commands: both,
  },
  drainGrace: {
    flag: 'drain-grace',
    env: ['BERTH_DRAIN_GRACE'],
    type: 'duration',
    default: '10m',
    min: 0,
    help: 'after SIGTERM, how long running builds may finish before they are canceled',
    group: 'Berth',
    commands: start,
  },
  listen: {
    flag: 'listen',
    env: ['BERTH_LISTEN'],
    type: 'listen',
    defaultHelp: '0.0.0.0:<port of the worker address, else 8080>',
    help: 'where the worker API listens, host:port',
    group: 'Berth',
    commands: start,
  },
  stateDir: {
    flag: 'state-dir',
    env: ['BERTH_STATE_DIR'],
    type: 'path',
    defaultHelp: '$STATE_DIRECTORY, /var/lib/berth-worker as root, else $XDG_STATE_HOME/berth-worker',
    help: 'private directory of the running-builds file (build tokens), so a restart reports lost builds',
    group: 'Berth',
    commands: start,
  },
  serverTimeout: {
    flag: 'server-timeout',
    env: ['BERTH_SERVER_TIMEOUT'],
    type: 'duration',
    default: '15s',
    min: 100,
    help: 'timeout of one Vela server call (calls are retried)',
    group: 'Berth',
    commands: start,
  },
} as const satisfies Record<string, SettingSpec>;

/** A setting's name in {@link SETTINGS}. */
export type SettingName = keyof typeof SETTINGS;

/** The settings a command reads, in table order. */
export function settingsOf(command: ConfigCommand): SettingName[] {
  return (Object.keys(SETTINGS) as SettingName[]).filter((name) => (SETTINGS[name] as SettingSpec).commands.includes(command));
}

/** How messages name a setting: Vela's name when it has one, else its flag. */
export function settingLabel(name: SettingName): string {
  const spec: SettingSpec = SETTINGS[name];
  return spec.vela ?? spec.flag;
}

/** The environment variables a setting reads under a command. */
export function envOf(name: SettingName, command: ConfigCommand): readonly string[] {
  const spec: SettingSpec = SETTINGS[name];
  return (command === 'exec' ? spec.exec?.env : undefined) ?? spec.env;
}

/** The default a setting has under a command (text, as written). */
export function defaultOf(name: SettingName, command: ConfigCommand): string | undefined {
  const spec: SettingSpec = SETTINGS[name];
  return (command === 'exec' ? spec.exec?.default : undefined) ?? spec.default;
}

const kebab = (s: string): string =>
  s
    .replace(/[._]/g, '-')
    .replace(/([a-z0-9])([A-Z])/g, '$1-$2')
    .toLowerCase();
const camel = (s: string): string => s.replace(/-([a-z0-9])/g, (_m, c: string) => c.toUpperCase());

/**
 * Every long-flag spelling of a setting: its flag, Vela's name, both in kebab and camel case, and
 * its aliases (`build-limit`, `build.limit`, `buildLimit`; `checkIn`, `check-in`).
 */
export function spellingsOf(name: SettingName): string[] {
  const spec: SettingSpec = SETTINGS[name];
  const base = [spec.flag, ...(spec.vela ? [spec.vela] : []), ...(spec.aliases ?? [])];
  return [...new Set(base.flatMap((s) => [s, kebab(s), camel(kebab(s))]))];
}
