import { readFileSync } from 'node:fs';
import type { Command } from 'commander';
import path from 'node:path';
import { compilePipeline, type Build, type CompileError, type CompileOptions, type TemplateLoader } from '@berth/pipeline';
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

/** The flags of validate, compile and exec that change how a pipeline file is read. */
export interface PipelineFlags {
  /** `NAME:PATH` (repeatable): the local file a template name stands for (Vela CLI's flag). */
  templateFile?: string[];
  /** `yaml` (default) or `go`: the file itself is a Go template. */
  pipelineType?: string;
  /** Unknown keys are errors instead of warnings. */
  strict?: boolean;
  /** The build's event (`push`, `pull_request[:action]`, `tag`, …): steps whose rulesets do not match are dropped. */
  event?: string;
  branch?: string;
  tag?: string;
  target?: string;
  comment?: string;
}

/** Registers {@link PipelineFlags} on a command. */
export function pipelineFlagOptions(command: Command): Command {
  return command
    .option('--template-file <NAME:PATH>', 'the local file for a template the pipeline names (repeatable)', (v: string, prev: string[]) => [...prev, v], [])
    .option('--pipeline-type <type>', 'yaml (default) or go: the file is a Go template rendered first')
    .option('--strict', 'unknown keys are errors, not warnings')
    .option('--event <event>', "the build's event for rulesets: push, pull_request[:action], tag, deployment, comment, schedule")
    .option('--branch <name>', "the build's branch for rulesets")
    .option('--tag <name>', "the build's tag for rulesets")
    .option('--target <name>', "the deployment target for rulesets")
    .option('--comment <text>', 'the pull request comment for rulesets');
}

/**
 * The compile options {@link PipelineFlags} stand for. Templates resolve as `vela exec` does:
 * `--template-file NAME:PATH` first (relative to `cwd`), then `type: file` sources relative to
 * the pipeline file's directory; remote sources (GitHub) are refused naming the template, its
 * source and the `--template-file` alternative.
 */
export function pipelineOptions(file: string, cwd: string, flags: PipelineFlags): Pick<CompileOptions, 'templates' | 'pipelineType' | 'strict' | 'ruleData' | 'metadata'> {
  const mapped = new Map<string, string>();
  const bad: string[] = [];
  for (const entry of flags.templateFile ?? []) {
    const colon = entry.indexOf(':');
    if (colon <= 0 || colon === entry.length - 1) bad.push(`--template-file "${entry}" is not NAME:PATH (e.g. --template-file golang:templates/go.yml)`);
    else mapped.set(entry.slice(0, colon), entry.slice(colon + 1));
  }
  if (bad.length > 0) throw new CommandError(bad.join('\n'), EXIT.usage);
  const read = (label: string, absolute: string, what: string): ReturnType<TemplateLoader> => {
    try {
      return { ok: true, file: label, text: readFileSync(absolute, 'utf8') };
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      return { ok: false, message: `cannot read ${what} at ${label}: ${code === 'ENOENT' ? 'no such file' : String(error)}` };
    }
  };
  const pipelineDir = path.dirname(path.resolve(cwd, file));
  const templates: TemplateLoader = (t) => {
    const local = mapped.get(t.name);
    if (local !== undefined) return read(local, path.resolve(cwd, local), `--template-file ${t.name}`);
    if (t.type === 'file') {
      const absolute = path.resolve(pipelineDir, t.source);
      return read(path.relative(cwd, absolute) || absolute, absolute, `template ${t.name} (type: file)`);
    }
    return {
      ok: false,
      message: `template ${t.name} comes from ${t.source} (type ${t.type}), which Berth does not fetch in local runs`,
      hint: `download it and pass --template-file ${t.name}:<path>`,
    };
  };
  const out: Pick<CompileOptions, 'templates' | 'pipelineType' | 'strict' | 'ruleData' | 'metadata'> = { templates };
  if (flags.pipelineType !== undefined) out.pipelineType = flags.pipelineType;
  if (flags.strict === true) out.strict = true;
  const rules = ruleFlags(flags);
  if (rules !== undefined) Object.assign(out, rules);
  return out;
}

/** Vela's default action for an event given without one (what its webhooks send most). */
const DEFAULT_ACTIONS: Record<string, string> = { pull_request: 'opened', comment: 'created', deployment: 'created' };

/**
 * Rule data and build facts from --event/--branch/--tag/--target/--comment, as Vela's compiler
 * builds its RuleData (compiler/native/compile.go Compile): `event:action`, the tag without
 * `refs/tags/`, the deploy target. None given: no purge (every step is kept).
 */
function ruleFlags(flags: PipelineFlags): Pick<CompileOptions, 'ruleData' | 'metadata'> | undefined {
  if (flags.event === undefined && flags.branch === undefined && flags.tag === undefined && flags.target === undefined && flags.comment === undefined) return undefined;
  const [eventName = '', givenAction] = (flags.event ?? '').split(':');
  const action = givenAction ?? DEFAULT_ACTIONS[eventName] ?? '';
  const event = action !== '' ? `${eventName}:${action}` : eventName;
  const branch = flags.branch ?? '';
  const tag = flags.tag ?? '';
  return {
    ruleData: { event, branch, tag, target: flags.target ?? '', comment: flags.comment ?? '' },
    metadata: {
      build: {
        event: eventName,
        event_action: action,
        branch,
        ref: tag !== '' ? `refs/tags/${tag}` : branch !== '' ? `refs/heads/${branch}` : '',
        deploy: flags.target ?? '',
      },
    },
  };
}
