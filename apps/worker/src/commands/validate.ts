import type { Command } from 'commander';
import { compilePipeline, skipEmptyBuild } from '@berth/pipeline';
import type { Io } from '../io.ts';
import { EXIT } from '../exit-codes.ts';
import { DEFAULT_PIPELINE_FILE, formatCompileErrors, pipelineFlagOptions, pipelineOptions, readPipelineFile, type PipelineFlags } from '../pipeline-file.ts';

/** `berth validate [file]`: every problem with file, line, column and a hint; exit 1 if any. */
export function validateCommand(program: Command, io: Io): void {
  pipelineFlagOptions(
    program
      .command('validate')
      .description('check a Vela pipeline file and list every problem with its line and column')
      .argument('[file]', 'the pipeline file', DEFAULT_PIPELINE_FILE),
  ).action(async (file: string, flags: PipelineFlags) => {
    const options = await pipelineOptions(file, io.cwd, flags, io.env);
    const result = compilePipeline(readPipelineFile(file, io.cwd), { file, ...options });
    for (const warning of result.warnings) io.stderr.write(`warning: ${warning}\n`);
    if (!result.ok) {
      io.stderr.write(`${formatCompileErrors(result.errors)}\n`);
      io.stderr.write(`${result.errors.length} problem${result.errors.length === 1 ? '' : 's'} in ${file}\n`);
      io.exitCode = EXIT.failed;
      return;
    }
    const b = result.build;
    // go-vela/server api/build/skip.go SkipEmptyBuild: the file is valid, but Vela runs nothing.
    const skip = skipEmptyBuild(b);
    if (skip !== '') {
      io.stdout.write(`${file} is valid, but has nothing to run: Vela's server would skip the build (${skip})\n`);
      return;
    }
    const steps = b.steps.length + b.stages.reduce((n, s) => n + s.steps.length, 0);
    io.stdout.write(`${file} is valid: ${b.stages.length > 0 ? `${b.stages.length} stages, ` : ''}${steps} steps, ${b.services.length} services\n`);
  });
}
