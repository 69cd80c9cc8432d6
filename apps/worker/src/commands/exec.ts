import path from 'node:path';
import type { Command } from 'commander';
import { background, withCancel } from '@berth/context';
import { runBuild, RuntimeEventRouter, type Executor } from '@berth/executor';
import { ConsoleReporter } from '../console-reporter.ts';
import type { Build } from '@berth/pipeline';
import { hasCapability, isRuntimeError, type Runtime } from '@berth/runtime';
import { CommandError, EXIT } from '../exit-codes.ts';
import type { Io } from '../io.ts';
import { formatResolvedConfig } from '../config/check-config.ts';
import { addSettingOptions } from '../config/options.ts';
import { parseExecConfig, type ExecFlags } from '../exec-config.ts';
import { cleanUpLeftovers, cleanupOnly, execWorkerId } from '../exec-leftovers.ts';
import { createLogger } from '../logger.ts';
import { compileFile, DEFAULT_PIPELINE_FILE, pipelineFlagOptions, pipelineOptions, type PipelineFlags } from '../pipeline-file.ts';
import { loadRuntime } from '../plugins/load.ts';
import { collect } from './compile.ts';
import { VERSION } from '../version.ts';

/** `berth exec [file]`: compiles a Vela pipeline file and runs it locally in containers. */
export function execCommand(program: Command, io: Io): void {
  const cmd = pipelineFlagOptions(
    program
      .command('exec')
      .description('run a Vela pipeline file locally in containers, with the current directory as the workspace')
      .argument('[file]', 'the pipeline file', DEFAULT_PIPELINE_FILE)
      .option('-e, --env <NAME=VALUE>', 'an environment variable for every step (repeatable)', collect, [])
      .option('-s, --secret <NAME=VALUE>', "a secret's value, by the name the pipeline declares (repeatable)", collect, [])
      .option('--secrets-file <file>', 'secrets as name=value lines')
      .option('--step <name>', 'run only this step (repeatable); services still run', collect, [])
      .option('--stage <name>', 'run only this stage (repeatable)', collect, [])
      .option('--no-color', 'no colours, even on a terminal')
      .option('--cleanup', 'only remove what killed berth exec runs of this host left (containers, network, volume), then exit'),
  );
  addSettingOptions(cmd, 'exec');
  cmd.action(async (file: string, flags: ExecFlags & PipelineFlags & { cleanup?: boolean }) => {
    io.exitCode = await execPipeline(file, flags, io);
  });
}

async function execPipeline(file: string, flags: ExecFlags & PipelineFlags & { cleanup?: boolean }, io: Io): Promise<number> {
  // Everything the user typed is checked before anything runs: one message lists every problem.
  const config = await parseExecConfig(flags, io.env, io.cwd);
  if (flags.checkConfig === true) {
    io.stdout.write(formatResolvedConfig('exec', config.values, config.sourceOf));
    return EXIT.ok;
  }
  const secrets = { ...config.secretsFile, ...config.secret };
  const environment = config.env;
  const logger = createLogger(io, config.logLevel, config.color);
  // The plugin too is checked before the pipeline is compiled: --runtime and --runtime-option are usage.
  const { descriptor } = await loadRuntime(config.runtime, {
    cwd: io.cwd,
    options: config.runtimeOption,
    builtinSettings: { kubeconfig: config.kubeconfig, namespace: config.namespace, pauseImage: config.pauseImage, ...config.containerLimits },
  });
  if (flags.cleanup === true) {
    await cleanupOnly(descriptor, background(), io.stderr);
    return EXIT.ok;
  }

  const compiled = compileFile(
    file,
    io.cwd,
    await pipelineOptions(file, io.cwd, flags, io.env, { secrets, environment, identity: { org: '', repo: '', number: config.buildNumber, local: true } }),
  );
  for (const warning of compiled.warnings) io.stderr.write(`warning: ${warning}\n`);
  const build = selectSubset(compiled.build, config.step, config.stage);
  const workspacePath = build.steps[0]?.directory || build.stages[0]?.steps[0]?.directory || '/vela/src';

  // The current directory is the workspace when the runtime can bind a host folder (the
  // hostWorkspace capability); any other runtime runs the build in a workspace of its own.
  const hostWorkspace = hasCapability(descriptor, 'hostWorkspace');
  if (!hostWorkspace) {
    io.stderr.write(
      `warning: the ${descriptor.name} runtime does not declare the hostWorkspace capability, so the build runs in a workspace of its own, without the files of ${path.resolve(io.cwd)}\n`,
    );
  }
  const color = config.color && Boolean(io.stdout.isTTY) && !io.env.NO_COLOR;
  const reporter = new ConsoleReporter(io.stdout, { build, color, env: io.env });
  const [ctx, cancel] = withCancel(background());
  const events = new RuntimeEventRouter();

  let runtime: Runtime;
  try {
    runtime = await descriptor.create(ctx, {
      workerId: execWorkerId(),
      workspacePath,
      ...(hostWorkspace ? { workspaceHostPath: path.resolve(io.cwd) } : {}),
      stopGraceMs: config.stopGrace,
      onEvent: events.onEvent,
    });
  } catch (error) {
    cancel();
    // The plugin's own words (its RuntimeError, from whichever copy of @berth/runtime it was built with).
    if (isRuntimeError(error, 'InvalidConfig'))
      throw new CommandError(`the ${descriptor.name} runtime's configuration is invalid: ${error.detail}`, EXIT.usage);
    if (isRuntimeError(error)) throw new CommandError(`cannot start the ${descriptor.name} runtime (${error.code}): ${error.detail}`, EXIT.usage);
    throw error;
  }

  await cleanUpLeftovers(ctx, runtime, io.stderr);

  // Ctrl-C once: cancel the build and clean up. Twice: leave at once.
  let executor: Executor | undefined;
  let interrupted = false;
  const onSignal = (signal: NodeJS.Signals) => {
    if (interrupted) {
      io.stderr.write(
        `\nberth: ${signal} again: leaving without cleaning up (containers may remain; \`docker ps -a --filter label=berth.dev/worker\` lists them)\n`,
      );
      process.exit(EXIT.interrupted);
    }
    interrupted = true;
    io.stderr.write(`\nberth: ${signal}: cancelling the build and removing its containers (press Ctrl-C again to leave at once)\n`);
    executor?.cancelBuild(new Error(`interrupted by ${signal}`));
    cancel(new Error(`interrupted by ${signal}`));
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  try {
    const result = await runBuild(ctx, {
      build,
      runtime,
      reporter,
      timeoutMs: config.timeout,
      logger,
      events,
      // On, as in `vela exec` (go-vela/cli command/pipeline/exec.go: an outputs image by default).
      outputs: true,
      version: VERSION,
      onStart: (e) => {
        executor = e;
      },
    });
    if (interrupted) return EXIT.interrupted;
    return result.status === 'success' ? EXIT.ok : EXIT.failed;
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    cancel();
    await runtime.close();
  }
}

/** Keeps only the named steps or stages (and every service); unknown names are a usage error. */
export function selectSubset(build: Build, steps: readonly string[], stages: readonly string[]): Build {
  if (steps.length === 0 && stages.length === 0) return build;
  const problems: string[] = [];
  const stepNames = [...build.steps, ...build.stages.flatMap((s) => s.steps)].map((s) => s.name).filter((n) => n !== 'init');
  for (const name of steps) if (!stepNames.includes(name)) problems.push(`--step ${name}: no such step (steps: ${stepNames.join(', ')})`);
  const stageNames = build.stages.map((s) => s.name).filter((n) => n !== 'init');
  for (const name of stages) {
    if (!stageNames.includes(name))
      problems.push(`--stage ${name}: no such stage (${stageNames.length > 0 ? `stages: ${stageNames.join(', ')}` : 'the pipeline has no stages'})`);
  }
  if (problems.length > 0) throw new CommandError(problems.join('\n'));
  const keepStep = (name: string) => name === 'init' || steps.length === 0 || steps.includes(name);
  return {
    ...build,
    steps: build.steps.filter((s) => keepStep(s.name)),
    stages: build.stages
      .filter((s) => stages.length === 0 || stages.includes(s.name) || s.name === 'init')
      .map((s) => ({ ...s, needs: s.needs.filter((n) => stages.length === 0 || stages.includes(n)), steps: s.steps.filter((st) => keepStep(st.name)) }))
      .filter((s) => s.steps.length > 0),
  };
}
