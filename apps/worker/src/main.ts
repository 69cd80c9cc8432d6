import { Command, CommanderError } from 'commander';
import { normalizeArgs, WrappingHelp } from './config/options.ts';
import { CommandError, EXIT } from './exit-codes.ts';
import type { Io } from './io.ts';
import { VERSION } from './version.ts';

/** Adds one command to the program. */
type Register = (program: Command, io: Io) => void;

/**
 * The commands, each loaded only when it runs (or when help lists them all): `start` pulls in
 * the daemon's HTTP server and Redis client, `exec` the executor and the runtimes, and none of
 * that should cost `berth validate` its start-up time.
 */
const COMMANDS: Record<string, () => Promise<Register>> = {
  exec: async () => (await import('./commands/exec.ts')).execCommand,
  validate: async () => (await import('./commands/validate.ts')).validateCommand,
  compile: async () => (await import('./commands/compile.ts')).compileCommand,
  start: async () => (await import('./commands/start.ts')).startCommand,
  runtimes: async () => (await import('./commands/runtimes.ts')).runtimesCommand,
};

/** The command a command line names: its first argument, when that is a known command. */
function commandNamed(argv: readonly string[]): string | undefined {
  const first = argv[2];
  return first !== undefined && Object.hasOwn(COMMANDS, first) ? first : undefined;
}

/**
 * Builds the `berth` program; `io` receives its output and exit status. With `argv`, only the
 * command it names is loaded (all of them when it names none, for help and error messages).
 */
export async function createProgram(io: Io, argv?: readonly string[]): Promise<Command> {
  const program = new Command('berth')
    .description('Berth: a CI build worker for Vela pipelines, on Docker or Kubernetes.')
    .version(VERSION, '-V, --version')
    .showHelpAfterError('(run with --help for usage)')
    .configureOutput(output(io))
    .exitOverride()
    .addHelpText(
      'after',
      `
Exit status: 0 the build succeeded (or the file is valid), 1 the build failed (or the file has
problems), 2 bad usage or configuration (nothing ran), 130 interrupted with Ctrl-C.

Examples:
  berth exec examples/hello.yml
  berth exec --secret api_token=abc examples/secrets.yml
  berth validate .vela.yml
  berth compile .vela.yml > executable.json`,
    );
  const named = argv && commandNamed(argv);
  for (const name of named ? [named] : Object.keys(COMMANDS)) (await COMMANDS[name]!())(program, io);
  program.createHelp = () => new WrappingHelp();
  for (const command of program.commands) {
    command.exitOverride().configureOutput(output(io)).showHelpAfterError(`(run berth ${command.name()} --help for usage)`);
    command.createHelp = () => new WrappingHelp();
  }
  return program;
}

/** Where commander writes, and the width help wraps at: the terminal's, else `$COLUMNS`, else 80. */
function output(io: Io) {
  const width = (stream: Io['stdout']): number => {
    const columns = stream.isTTY ? (stream as { columns?: number }).columns : Number(io.env.COLUMNS) || undefined;
    return columns && columns >= 40 ? columns : 80;
  };
  return {
    writeOut: (text: string) => io.stdout.write(text),
    writeErr: (text: string) => io.stderr.write(text),
    getOutHelpWidth: () => width(io.stdout),
    getErrHelpWidth: () => width(io.stderr),
  };
}

/** Rewrites go-vela/worker's flag spellings (`-build.limit=2`, `--checkIn`) for `start` and `exec`. */
function normalizeArgv(program: Command, argv: readonly string[]): string[] {
  const at = argv.findIndex((a, i) => i >= 2 && !a.startsWith('-'));
  const command = at < 0 ? undefined : program.commands.find((c) => c.name() === argv[at]);
  if (!command || (command.name() !== 'start' && command.name() !== 'exec')) return [...argv];
  return [...argv.slice(0, at + 1), ...normalizeArgs(command, command.name() as 'start' | 'exec', argv.slice(at + 1))];
}

/**
 * Runs the `berth` command line and returns its exit status; never throws. Usage and
 * configuration errors print one message (never a stack trace) and return 2.
 */
export async function main(argv: readonly string[], io: Io = processIo()): Promise<number> {
  try {
    const program = await createProgram(io, argv);
    await program.parseAsync(normalizeArgv(program, argv));
    return io.exitCode;
  } catch (error) {
    if (error instanceof CommanderError) {
      // help and version end with code 0; commander has printed the message already
      return error.exitCode === 0 ? EXIT.ok : EXIT.usage;
    }
    if (error instanceof CommandError) {
      io.stderr.write(`berth: ${error.message}\n`);
      return error.exitCode;
    }
    io.stderr.write(`berth: unexpected error: ${error instanceof Error ? error.message : String(error)}\n`);
    if (io.env.BERTH_DEBUG) io.stderr.write(`${error instanceof Error ? error.stack : ''}\n`);
    else io.stderr.write('This is a bug in Berth; run again with BERTH_DEBUG=1 for details and report it.\n');
    return EXIT.failed;
  }
}

function processIo(): Io {
  return { stdout: process.stdout, stderr: process.stderr, env: process.env, cwd: process.cwd(), exitCode: EXIT.ok };
}
