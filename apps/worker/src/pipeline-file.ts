import { readFileSync } from 'node:fs';
import path from 'node:path';
import { compilePipeline, type Build, type CompileError, type CompileOptions } from '@berth/pipeline';
import { CommandError, EXIT } from './exit-codes.ts';

/** The pipeline file `berth` uses when none is named: Vela's default. */
export const DEFAULT_PIPELINE_FILE = '.vela.yml';

/** Reads a pipeline file (relative to `cwd`), with a clear message when it cannot be read. */
export function readPipelineFile(file: string, cwd: string): string {
  try {
    return readFileSync(path.resolve(cwd, file), 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') {
      const hint = file === DEFAULT_PIPELINE_FILE ? ' (name a pipeline file, e.g. `berth exec examples/hello.yml`)' : '';
      throw new CommandError(`no pipeline file at ${file}${hint}`);
    }
    if (code === 'EISDIR') throw new CommandError(`${file} is a directory; name the pipeline file in it, e.g. ${path.join(file, '.vela.yml')}`);
    if (code === 'EACCES') throw new CommandError(`cannot read ${file}: permission denied`);
    throw new CommandError(`cannot read ${file}: ${String(error)}`);
  }
}

/** `file:line:column: message` and an indented hint, one problem per entry. */
export function formatCompileErrors(errors: readonly CompileError[]): string {
  return errors
    .map((e) => `${e.file}:${e.line}:${e.column}: ${e.message}${e.hint ? `\n    hint: ${e.hint}` : ''}`)
    .join('\n');
}

/** Compiles a pipeline file or throws a {@link CommandError} (exit 1) listing every problem. */
export function compileFile(file: string, cwd: string, options: Omit<CompileOptions, 'file'> = {}): { build: Build; warnings: string[] } {
  const result = compilePipeline(readPipelineFile(file, cwd), { ...options, file });
  if (!result.ok) {
    const count = result.errors.length;
    const warnings = result.warnings.map((w) => `warning: ${w}\n`).join('');
    throw new CommandError(`${warnings}${formatCompileErrors(result.errors)}\n${count} problem${count === 1 ? '' : 's'} in ${file}`, EXIT.failed);
  }
  return { build: result.build, warnings: result.warnings };
}
