import { readFileSync } from 'node:fs';
import type { Command } from 'commander';
import { pino, type Logger } from 'pino';
import { formatResolvedConfig } from '../config/check-config.ts';
import { ConfigFileError, readConfigFile } from '../config/config-file.ts';
import { DotenvError, loadDotenv } from '../config/dotenv.ts';
import { addSettingOptions } from '../config/options.ts';
import type { ConfigSources } from '../config/resolve.ts';
import { CommandError, EXIT } from '../exit-codes.ts';
import type { Io } from '../io.ts';
import { prettyStderr } from '../logger.ts';
import { ConfigError, type StartConfig, type StartConfigRead, type StartExtras, readStartConfig } from '../vela/config.ts';
import { loadRuntime } from '../plugins/load.ts';
import { VERSION } from '../version.ts';

export type { StartExtras };

/** Reads a `/vela/...` file fallback: undefined when it does not exist (urfave/cli's fileValueSource ignores any read error). */
export function readVelaFile(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT' || (e as NodeJS.ErrnoException).code === 'ENOTDIR') return undefined;
    throw e;
  }
}

/**
 * Reads Vela's settings and Berth's extras from flags and the environment (and, when given, a
 * `.env` file, a config file and the `/vela` file fallbacks). Throws one {@link ConfigError}
 * listing every problem of all of them.
 */
export function parseStartConfig(
  flags: Record<string, unknown>,
  env: NodeJS.ProcessEnv,
  defaultHostname?: string,
  more: Omit<ConfigSources, 'flags' | 'env'> & { cwd?: string } = {},
): { config: StartConfig; extras: StartExtras } {
  const read = readStartConfig({ flags, env, ...more, ...(defaultHostname === undefined ? {} : { defaultHostname }) });
  return { config: read.config, extras: read.extras };
}

/**
 * Everything `berth start` reads, as the command line does: `.env` in the working directory
 * (go-vela/worker's godotenv autoload), `--config` / `BERTH_CONFIG`, and the `/vela` files.
 */
export async function readStartSources(flags: Record<string, unknown>, io: Io): Promise<StartConfigRead> {
  const problems: string[] = [];
  let dotenv;
  try {
    dotenv = loadDotenv(io.cwd);
  } catch (e) {
    if (!(e instanceof DotenvError)) throw e;
    problems.push(e.message);
  }
  let configFile;
  const configPath = typeof flags.config === 'string' ? flags.config : io.env.BERTH_CONFIG || undefined;
  if (configPath !== undefined) {
    try {
      configFile = await readConfigFile(configPath, io.cwd);
    } catch (e) {
      if (!(e instanceof ConfigFileError)) throw e;
      problems.push(e.message);
    }
  }
  const settings = { ...flags };
  delete settings.config;
  delete settings.checkConfig;
  try {
    const read = readStartConfig({
      flags: settings,
      env: io.env,
      readFile: readVelaFile,
      cwd: io.cwd,
      ...(dotenv ? { dotenv } : {}),
      ...(configFile ? { configFile } : {}),
    });
    if (problems.length > 0) throw new CommandError(problems.join('\n'), EXIT.usage);
    return read;
  } catch (e) {
    if (e instanceof ConfigError) throw new CommandError([...problems, e.message].join('\n'), EXIT.usage);
    throw e;
  }
}

/** Berth's own log for the daemon: JSON lines (VELA_LOG_FORMAT=json) or readable text, on stderr. */
export async function daemonLogger(io: Io, config: StartConfig): Promise<Logger> {
  const level = config.log.level === 'panic' ? 'fatal' : config.log.level;
  if (config.log.format === 'text') {
    const colorize = Boolean(io.stderr.isTTY) && !io.env.NO_COLOR;
    return pino({ level, base: undefined }, await prettyStderr(io, colorize));
  }
  return pino({ level, base: { name: 'berth-worker', worker: config.worker.hostname } }, io.stderr);
}

/** The notes under `berth start --help`, one paragraph a line (wrapped at the help width). */
const START_NOTES = [
  "Spellings: go-vela/worker's flag names work too (--build.limit, -build.limit=2, --checkIn 5m), and so do its variables, its /vela/... files and a .env file in the working directory. Precedence: flag > variable > --config file > /vela file > default; within a setting the first variable listed wins. Durations are Go durations (90s, 15m, 1h30m). Configuration problems are listed together; the exit status is then 2.",
  'Container limits: a Vela pipeline cannot ask for resources, so --container-cpus, --container-memory and --container-pids are what every container gets (not maxima a build could request up to). Docker runtime only; on Kubernetes, set resources in the pods template.',
  'Registration: with VELA_SERVER_SECRET the worker registers itself. Without it, a platform admin gets a registration token (POST /api/v1/admin/workers/<host>/register on the server) and posts it to this worker: curl -X POST -H "Authorization: Bearer $TOKEN" http://<worker>:8080/register',
  'Signals: SIGTERM or SIGINT drains (no new builds; running builds get --drain-grace, then are canceled, reported and cleaned up) and exits 0. A second signal cancels running builds at once.',
  'API: /health, /ready, /version, /metrics, POST /register, /api/v1/executors[/:id[/build|/pipeline|/repo]], DELETE /api/v1/executors/:id/build/cancel (the /api/v1 routes need a token the server validates).',
  'Example: VELA_SERVER_ADDR=https://vela.example.com VELA_SERVER_SECRET=… VELA_WORKER_ADDR=http://worker-1:8080 berth start',
];

/** The width help is wrapped at (the terminal's, else $COLUMNS, else 80), as commander computes it. */
function helpWidth(cmd: Command): number {
  return cmd.configureOutput().getOutHelpWidth?.() ?? 80;
}

/** Wraps paragraphs at word boundaries to `width` columns, a blank line between them. */
export function wrapParagraphs(paragraphs: readonly string[], width: number): string {
  return paragraphs
    .map((p) => {
      const lines: string[] = [];
      let line = '';
      for (const word of p.split(' ')) {
        if (line !== '' && line.length + 1 + word.length > width) {
          lines.push(line);
          line = word;
        } else line = line === '' ? word : `${line} ${word}`;
      }
      return [...lines, line].join('\n');
    })
    .join('\n\n');
}

/** `berth start`: the Vela worker daemon. */
export function startCommand(program: Command, io: Io): void {
  const cmd = program
    .command('start')
    .description('run as a Vela worker: register with a Vela server, run the builds its Redis queue hands out, serve the worker API');
  addSettingOptions(cmd, 'start');
  cmd.addHelpText('after', (context) => `\n${wrapParagraphs(START_NOTES, context.error ? 80 : helpWidth(cmd))}`);
  cmd.action(async (flags: Record<string, unknown>) => {
    io.exitCode = await runStart(flags, io);
  });
}

async function runStart(flags: Record<string, unknown>, io: Io): Promise<number> {
  const read = await readStartSources(flags, io);
  if (flags.checkConfig === true) {
    io.stdout.write(formatResolvedConfig('start', read.values, read.sourceOf));
    return EXIT.ok;
  }
  const { config, extras } = read;
  const logger = await daemonLogger(io, config);
  // Loaded here, not at the top: `berth --version`, `exec` and `--help` need none of the daemon.
  const { Daemon } = await import('../daemon/daemon.ts');
  let daemon: Awaited<ReturnType<typeof Daemon.start>>;
  const { cpus, memoryBytes, pidsLimit } = extras.containerLimits;
  const runtimeSettings = {
    ...(extras.pauseImage ? { pauseImage: extras.pauseImage } : {}),
    ...(cpus !== undefined ? { cpus } : {}),
    ...(memoryBytes !== undefined ? { memoryBytes } : {}),
    ...(pidsLimit !== undefined ? { pidsLimit } : {}),
  };
  // A runtime plugin (or options for the built-in one) is checked before anything starts: usage.
  const plugin =
    extras.runtimePlugin !== undefined || Object.keys(extras.runtimeOptions).length > 0
      ? await loadRuntime(extras.runtimePlugin ?? config.runtime.driver, {
          cwd: io.cwd,
          options: extras.runtimeOptions,
          builtinSettings: {
            ...runtimeSettings,
            dropCapabilities: config.runtime.dropCapabilities.length > 0 ? config.runtime.dropCapabilities : undefined,
            kubeconfig: config.runtime.config,
            namespace: config.runtime.namespace,
            podsTemplateName: config.runtime.podsTemplateName,
            podsTemplateFile: config.runtime.podsTemplateFile,
          },
        })
      : undefined;
  try {
    daemon = await Daemon.start({
      ...(plugin ? { runtime: plugin.descriptor } : {}),
      config,
      logger,
      version: VERSION,
      drainGraceMs: extras.drainGraceMs,
      stopGraceMs: extras.stopGraceMs,
      ...(extras.listen ? { listen: extras.listen } : {}),
      stateDir: extras.stateDir,
      serverTimeoutMs: extras.serverTimeoutMs,
      ...(Object.keys(runtimeSettings).length > 0 ? { runtimeSettings } : {}),
    });
  } catch (e) {
    const code = (e as { code?: string }).code;
    const msg = e instanceof Error ? ((e as { detail?: string }).detail ?? e.message) : String(e);
    if (code === 'EADDRINUSE' || code === 'EACCES') throw new CommandError(`cannot listen for the worker API: ${msg}`, EXIT.usage);
    const runtimeName = plugin?.descriptor.name ?? config.runtime.driver;
    if (code === 'InvalidConfig') throw new CommandError(`invalid ${runtimeName} runtime configuration: ${msg}`, EXIT.usage);
    throw new CommandError(`cannot start the ${runtimeName} runtime: ${msg}`, EXIT.failed);
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
