import type { Command } from 'commander';
import { marshalBuild } from '@berth/pipeline';
import type { Io } from '../io.ts';
import { parseAssignments } from '../options.ts';
import { compileFile, DEFAULT_PIPELINE_FILE, pipelineFlagOptions, pipelineOptions, type PipelineFlags } from '../pipeline-file.ts';

/** `berth compile [file]`: prints the compiled pipeline as JSON, the form a Vela server hands a worker. */
export function compileCommand(program: Command, io: Io): void {
  pipelineFlagOptions(
    program
      .command('compile')
      .description('print the compiled pipeline as JSON (the executable a Vela server hands a worker)')
      .argument('[file]', 'the pipeline file', DEFAULT_PIPELINE_FILE)
      .option('-e, --env <NAME=VALUE>', 'an environment variable for every step (repeatable)', collect, []),
  ).action(async (file: string, options: { env: string[] } & PipelineFlags) => {
    const environment = parseAssignments(options.env, '--env');
    const { build, warnings } = compileFile(file, io.cwd, await pipelineOptions(file, io.cwd, options, io.env, { environment }));
    for (const warning of warnings) io.stderr.write(`warning: ${warning}\n`);
    io.stdout.write(`${JSON.stringify(marshalBuild(build), null, 2)}\n`);
  });
}

/** commander's collector for repeatable options. */
export function collect(value: string, previous: string[]): string[] {
  return [...previous, value];
}
