import { tmpdir } from 'node:os';
import path from 'node:path';
import { type Command, Option } from 'commander';
import { pino, type Logger } from 'pino';
import { PinoPretty } from 'pino-pretty';
import { Daemon } from '../daemon/daemon.ts';
import { CommandError, EXIT } from '../exit-codes.ts';
import type { Io } from '../io.ts';
import { ConfigError, type ConfigIssue, SETTINGS, type SettingName, type StartConfig, loadStartConfig, parseGoDuration } from '../vela/config.ts';
import { VERSION } from '../version.ts';

/** Defaults and help of Vela's settings, as `berth start --help` shows them. */
const HELP: Record<SettingName, [string, string]> = {
  workerAddr: ['the worker address the server reaches it at; its host is the worker id, its port the API port', 'http://<hostname>'],
  checkIn: ['interval between check-ins with the server', '15m'],
  buildLimit: ['builds run at once (build slots)', '1'],
  buildTimeout: ['build timeout (a repo timeout > 0 overrides it)', '30m'],
  logFormat: ["Berth's own log: json or text", 'json'],
  logLevel: ["Berth's own log level: trace, debug, info, warn, error, fatal", 'info'],
  serverAddr: ['the Vela server address (required)', ''],
  serverSecret: ['shared secret with the server (VELA_SECRET); without it, register with POST /register', ''],
  serverCert: ['TLS certificate for an https worker address', ''],
  serverCertKey: ['TLS key for an https worker address', ''],
  serverTlsMinVersion: ['minimum TLS version', '1.2'],
  executorDriver: ['executor (linux only)', 'linux'],
  executorMaxLogSize: ['bytes kept and uploaded per step log; 0: no limit', '0'],
  logStreamingTimeout: ['how long log streams may outlive a canceled build', '5m'],
  enforceTrustedRepos: ['only trusted repos may run privileged images', 'true'],
  outputsImage: ['outputs image (outputs and artifacts are not supported by Berth yet)', ''],
  queueDriver: ['queue driver (redis only)', 'redis'],
  queueAddr: ['Redis URL; default: the address the server reports', ''],
  queueCluster: ['Redis Sentinel (not supported yet)', 'false'],
  queueRoutes: ['routes (Redis lists) to pop, comma-separated', 'vela'],
  queuePopTimeout: ['BLPOP timeout', '60s'],
  queuePublicKey: ["queue public key when the server's queue info has none", ''],
  runtimeDriver: ['docker or kubernetes', 'docker'],
  runtimeConfig: ['kubeconfig path (kubernetes); default in-cluster or ~/.kube/config', ''],
  runtimeNamespace: ['namespace of build pods (kubernetes)', ''],
  runtimePodsTemplateName: ['PipelinePodsTemplate resource name (kubernetes)', ''],
  runtimePodsTemplateFile: ['PipelinePodsTemplate YAML file (kubernetes)', ''],
  runtimePrivilegedImages: ['images allowed to run privileged, comma-separated', ''],
  runtimeVolumes: ['host volumes steps may mount (src:dst[:ro|rw]), comma-separated', ''],
  runtimeDropCapabilities: ['capabilities dropped from every container (CAP_NET_RAW,…)', ''],
  storageFileSizeLimit: ['artifact file size limit in MB (artifacts are not supported yet)', '100'],
  storageBuildFileSizeLimit: ['artifact size limit per build in MB', '500'],
};

/** Berth's own settings of `berth start` (not Vela's). */
const EXTRAS = {
  drainGrace: { flag: 'drain-grace', env: 'BERTH_DRAIN_GRACE', default: '10m', help: 'after SIGTERM, how long running builds may finish before they are canceled' },
  stopGrace: { flag: 'stop-grace', env: 'BERTH_STOP_GRACE', default: '10s', help: 'SIGTERM to SIGKILL for the containers of a canceled build' },
  listen: { flag: 'listen', env: 'BERTH_LISTEN', default: '0.0.0.0:<port of the worker address, else 8080>', help: 'where the worker API listens, host:port' },
  stateDir: { flag: 'state-dir', env: 'BERTH_STATE_DIR', default: path.join(tmpdir(), 'berth-worker'), help: 'private directory for the running-builds file (build tokens), so a restart reports lost builds' },
  serverTimeout: { flag: 'server-timeout', env: 'BERTH_SERVER_TIMEOUT', default: '15s', help: 'timeout of one Vela server call (calls are retried)' },
  pauseImage: { flag: 'kubernetes-pause-image', env: 'BERTH_KUBERNETES_PAUSE_IMAGE', default: 'kubernetes/pause:latest', help: 'kubernetes: the image containers start on' },
} as const;

type ExtraName = keyof typeof EXTRAS;

/** Settings of `berth start` beyond Vela's. */
export interface StartExtras {
  drainGraceMs: number;
  stopGraceMs: number;
  listen: { host: string; port: number } | undefined;
  stateDir: string;
  serverTimeoutMs: number;
  pauseImage: string | undefined;
}

const kebab = (flag: string): string => flag.replace(/[._]/g, '-').replace(/([a-z])([A-Z])/g, '$1-$2').toLowerCase();
const camel = (k: string): string => k.replace(/-([a-z])/g, (_m, c: string) => c.toUpperCase());

/**
 * Reads Vela's settings and Berth's extras from flags and the environment. Throws one
 * {@link ConfigError} listing every problem of both.
 */
export function parseStartConfig(flags: Record<string, unknown>, env: NodeJS.ProcessEnv, defaultHostname?: string): { config: StartConfig; extras: StartExtras } {
  const issues: ConfigIssue[] = [];
  let config: StartConfig | undefined;
  const velaFlags = { ...flags };
  if (flags.runtime !== undefined && flags.runtimeDriver === undefined) velaFlags.runtimeDriver = flags.runtime;
  delete velaFlags.runtime;
  try {
    config = loadStartConfig({ env, flags: velaFlags, ...(defaultHostname === undefined ? {} : { defaultHostname }) });
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e;
    issues.push(...e.issues);
  }
  const raw = (name: ExtraName): { value: string; source: string } | undefined => {
    const f = flags[camel(EXTRAS[name].flag)];
    if (typeof f === 'string') return { value: f, source: `flag --${EXTRAS[name].flag}` };
    const v = env[EXTRAS[name].env];
    if (v !== undefined && v !== '') return { value: v, source: `env ${EXTRAS[name].env}` };
    return undefined;
  };
  const problem = (name: ExtraName, source: string, message: string): void => void issues.push({ setting: 'config', source, message: `${EXTRAS[name].flag} (${source}): ${message}` });
  const duration = (name: ExtraName, min: number): number => {
    const r = raw(name);
    const ms = parseGoDuration(r?.value ?? EXTRAS[name].default);
    if (ms === undefined) problem(name, r?.source ?? 'default', `must be a Go duration like 30s or 10m, got ${JSON.stringify(r?.value)}`);
    else if (ms < min) problem(name, r?.source ?? 'default', `must be at least ${min} ms, got ${JSON.stringify(r?.value)}`);
    return ms ?? 0;
  };
  const drainGraceMs = duration('drainGrace', 0);
  const stopGraceMs = duration('stopGrace', 0);
  const serverTimeoutMs = duration('serverTimeout', 100);
  let listen: StartExtras['listen'];
  const l = raw('listen');
  if (l) {
    const m = /^(?:(\[[^\]]+\]|[^:]*):)?(\d{1,5})$/.exec(l.value.trim());
    const port = m ? Number(m[2]) : NaN;
    if (!m || !(port >= 0 && port <= 65535)) problem('listen', l.source, `must be host:port or :port (port 0-65535), got ${JSON.stringify(l.value)}`);
    else listen = { host: (m[1] || '0.0.0.0').replace(/^\[|\]$/g, ''), port };
  }
  const stateDir = path.resolve(raw('stateDir')?.value ?? EXTRAS.stateDir.default);
  const pauseImage = raw('pauseImage')?.value;
  if (issues.length > 0 || !config) throw new ConfigError(issues);
  return { config, extras: { drainGraceMs, stopGraceMs, listen, stateDir, serverTimeoutMs, pauseImage } };
}

/** Berth's own log for the daemon: JSON lines (VELA_LOG_FORMAT=json) or readable text, on stderr. */
export function daemonLogger(io: Io, config: StartConfig): Logger {
  const level = config.log.level === 'warning' ? 'warn' : config.log.level === 'panic' ? 'fatal' : config.log.level;
  if (config.log.format === 'text') {
    const colorize = Boolean(io.stderr.isTTY) && !io.env.NO_COLOR;
    return pino({ level, base: undefined }, PinoPretty({ destination: io.stderr, sync: true, colorize, ignore: 'pid,hostname', translateTime: 'HH:MM:ss.l' }));
  }
  return pino({ level, base: { name: 'berth-worker', worker: config.worker.hostname } }, io.stderr);
}

/** `berth start`: the Vela worker daemon. */
export function startCommand(program: Command, io: Io): void {
  const cmd = program
    .command('start')
    .description('run as a Vela worker: register with a Vela server, run the builds its Redis queue hands out, serve the worker API');
  cmd.addOption(new Option('-r, --runtime <driver>', `alias of --runtime-driver`));
  for (const name of Object.keys(SETTINGS) as SettingName[]) {
    const s = SETTINGS[name];
    const [help, def] = HELP[name];
    const kind = s.kind === 'duration' ? '<duration>' : s.kind === 'int' ? '<n>' : s.kind === 'bool' ? '<bool>' : s.kind === 'list' ? '<a,b,…>' : '<value>';
    cmd.addOption(new Option(`--${kebab(s.flag)} ${kind}`, `${help} (env ${s.env.join(', ')}${def ? `; default ${def}` : ''})`));
  }
  for (const name of Object.keys(EXTRAS) as ExtraName[]) {
    const e = EXTRAS[name];
    cmd.addOption(new Option(`--${e.flag} <${name === 'listen' ? 'host:port' : name === 'stateDir' ? 'dir' : name === 'pauseImage' ? 'image' : 'duration'}>`, `${e.help} (env ${e.env}; default ${e.default})`));
  }
  cmd.addHelpText(
    'after',
    `
The first variable listed for a setting wins; a flag wins over the environment. Durations are Go
durations (90s, 15m, 1h30m). Configuration problems are listed together; the exit status is then 2.

Registration: with VELA_SERVER_SECRET the worker registers itself. Without it, a platform admin
gets a registration token (POST /api/v1/admin/workers/<host>/register on the server) and posts it
to this worker: curl -X POST -H "Authorization: Bearer $TOKEN" http://<worker>:8080/register

Signals: SIGTERM or SIGINT drains (no new builds; running builds get --drain-grace, then are
canceled, reported and cleaned up) and exits 0. A second signal cancels running builds at once.

API: /health, /ready, /version, /metrics, POST /register, /api/v1/executors[/:id[/build|/pipeline|/repo]],
DELETE /api/v1/executors/:id/build/cancel (the /api/v1 routes need a token the server validates).

Example:
  VELA_SERVER_ADDR=https://vela.example.com VELA_SERVER_SECRET=… VELA_WORKER_ADDR=http://worker-1:8080 berth start`,
  );
  cmd.action(async (flags: Record<string, unknown>) => {
    io.exitCode = await runStart(flags, io);
  });
}

async function runStart(flags: Record<string, unknown>, io: Io): Promise<number> {
  let parsed;
  try {
    parsed = parseStartConfig(flags, io.env);
  } catch (e) {
    if (e instanceof ConfigError) throw new CommandError(e.message, EXIT.usage);
    throw e;
  }
  const { config, extras } = parsed;
  const logger = daemonLogger(io, config);
  let daemon: Daemon;
  try {
    daemon = await Daemon.start({
      config,
      logger,
      version: VERSION,
      drainGraceMs: extras.drainGraceMs,
      stopGraceMs: extras.stopGraceMs,
      ...(extras.listen ? { listen: extras.listen } : {}),
      stateDir: extras.stateDir,
      serverTimeoutMs: extras.serverTimeoutMs,
      ...(extras.pauseImage ? { runtimeSettings: { pauseImage: extras.pauseImage } } : {}),
    });
  } catch (e) {
    const code = (e as { code?: string }).code;
    const msg = e instanceof Error ? ((e as { detail?: string }).detail ?? e.message) : String(e);
    if (code === 'EADDRINUSE' || code === 'EACCES') throw new CommandError(`cannot listen for the worker API: ${msg}`, EXIT.usage);
    if (code === 'InvalidConfig') throw new CommandError(`invalid ${config.runtime.driver} runtime configuration: ${msg}`, EXIT.usage);
    throw new CommandError(`cannot start the ${config.runtime.driver} runtime: ${msg}`, EXIT.failed);
  }
  let signals = 0;
  const onSignal = (signal: NodeJS.Signals): void => {
    signals += 1;
    if (signals === 1) void daemon.shutdown(signal);
    else if (signals === 2) void daemon.shutdown(`${signal} again`);
    else {
      logger.fatal({ signal }, 'third signal: leaving now without cleaning up (a restart reaps what is left)');
      process.exit(EXIT.interrupted);
    }
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  try {
    await daemon.done;
  } finally {
    process.off('SIGTERM', onSignal);
    process.off('SIGINT', onSignal);
  }
  return EXIT.ok;
}
