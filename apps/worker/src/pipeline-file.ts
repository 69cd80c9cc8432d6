import { readFileSync } from 'node:fs';
import type { Command } from 'commander';
import path from 'node:path';
import {
  compilePipeline,
  DEFAULT_TEMPLATE_DEPTH,
  parseTemplateSource,
  type Build,
  type CompileError,
  type CompileOptions,
  type TemplateLoad,
  type TemplateLoader,
  type TemplateReference,
} from '@berth/pipeline';
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
  return errors.map((e) => `${e.file}:${e.line}:${e.column}: ${e.message}${e.hint ? `\n    hint: ${e.hint}` : ''}`).join('\n');
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
  /** Token for fetching remote (`type: github`) templates; also VELA_COMPILER_GITHUB_TOKEN / COMPILER_GITHUB_TOKEN. */
  githubToken?: string;
  /** GitHub Enterprise URL (API at `<url>/api/v3`); also VELA_COMPILER_GITHUB_URL / COMPILER_GITHUB_URL. */
  githubUrl?: string;
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
    .option('--target <name>', 'the deployment target for rulesets')
    .option('--comment <text>', 'the pull request comment for rulesets')
    .option('--github-token <token>', 'token for fetching remote templates (type github); env VELA_COMPILER_GITHUB_TOKEN or COMPILER_GITHUB_TOKEN')
    .option(
      '--github-url <url>',
      `GitHub Enterprise URL for remote templates (API at <url>/api/v3); env VELA_COMPILER_GITHUB_URL or COMPILER_GITHUB_URL; default GitHub.com (${GITHUB_API})`,
    );
}

/** The options of a compile that {@link PipelineFlags} stand for (templates, pipeline type, strictness, rule data). */
type FlagOptions = Pick<CompileOptions, 'templates' | 'pipelineType' | 'strict' | 'ruleData' | 'metadata'>;

/** GitHub.com's API, where remote templates come from unless --github-url names a GitHub Enterprise. */
const GITHUB_API = 'https://api.github.com';

/**
 * The compile options {@link PipelineFlags} stand for, merged over `base` (the command's own
 * options: environment, secrets, identity). Templates resolve as `vela exec` does
 * (go-vela/server compiler/native/expand.go `getTemplate`, local mode): `--template-file
 * NAME:PATH` first (relative to `cwd`), then `type: file` sources relative to the pipeline file's
 * directory, then remote (`type: github`) sources.
 *
 * Remote templates need a token (--github-token, VELA_COMPILER_GITHUB_TOKEN or
 * COMPILER_GITHUB_TOKEN, as go-vela/cli command/pipeline/{exec,validate}.go read it); without one
 * they are refused naming the template, its source and the `--template-file` alternative. With one,
 * compiling stays synchronous: the file is compiled once to learn which remote templates it uses,
 * those are fetched from the GitHub contents API, and again until no template is missing (nested
 * remote templates, at most the template depth deep); the returned loader serves what was fetched.
 */
export async function pipelineOptions(
  file: string,
  cwd: string,
  flags: PipelineFlags,
  env: NodeJS.ProcessEnv = {},
  base: Omit<CompileOptions, 'file'> = {},
): Promise<Omit<CompileOptions, 'file'>> {
  const local = localTemplates(file, cwd, flags);
  const token = nonEmpty(flags.githubToken) ?? nonEmpty(env.VELA_COMPILER_GITHUB_TOKEN) ?? nonEmpty(env.COMPILER_GITHUB_TOKEN);
  const api = githubApiBase(nonEmpty(flags.githubUrl) ?? nonEmpty(env.VELA_COMPILER_GITHUB_URL) ?? nonEmpty(env.COMPILER_GITHUB_URL));
  const fetched = new Map<string, TemplateLoad>();
  const withLoader = (missing: Map<string, TemplateReference> | undefined): Omit<CompileOptions, 'file'> => {
    const templates: TemplateLoader = (t) => {
      const found = local(t);
      if (found !== undefined) return found;
      const got = fetched.get(t.source);
      if (got !== undefined) return got;
      if (missing !== undefined) {
        missing.set(t.source, t);
        return { ok: false, message: `template ${t.name} (${t.source}) is being fetched` };
      }
      if (token === undefined) {
        return {
          ok: false,
          message: `template ${t.name} comes from ${t.source} (type ${t.type}), which Berth does not fetch in local runs without a GitHub token`,
          hint: `download it and pass --template-file ${t.name}:<path>, or pass --github-token (or set VELA_COMPILER_GITHUB_TOKEN) to fetch it`,
        };
      }
      return { ok: false, message: `template ${t.name} (${t.source}) was not fetched: templates nest deeper than the template depth allows` };
    };
    const out = { ...base, ...flagOptions(flags), templates };
    return out;
  };
  if (token === undefined) return withLoader(undefined);
  const text = readPipelineFile(file, cwd);
  const rounds = (base.templateDepth ?? DEFAULT_TEMPLATE_DEPTH) + 1;
  for (let round = 0; round < rounds; round++) {
    const missing = new Map<string, TemplateReference>();
    compilePipeline(text, { file, ...withLoader(missing) });
    if (missing.size === 0) break;
    await Promise.all([...missing.values()].map(async (t) => fetched.set(t.source, await fetchTemplate(t, api, token))));
  }
  return withLoader(undefined);
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value.trim() === '' ? undefined : value.trim();
}

/**
 * The API base for a GitHub URL, as go-vela/server compiler/registry/github/github.go `New` derives
 * it: GitHub.com's API for github.com (or api.github.com itself), `<url>/api/v3` for an Enterprise.
 */
function githubApiBase(url: string | undefined): string {
  if (url === undefined) return GITHUB_API;
  const trimmed = url.replace(/\/+$/, '');
  let host: string;
  try {
    const parsed = new URL(trimmed);
    if (parsed.protocol !== 'https:' && parsed.protocol !== 'http:') throw new Error('not http');
    host = parsed.host.toLowerCase();
  } catch {
    throw new CommandError(`--github-url ${url} is not an http(s) URL (e.g. https://github.example.com for a GitHub Enterprise)`, EXIT.usage);
  }
  if (host === 'github.com' || host === 'api.github.com') return GITHUB_API;
  return /\/api\/v3$/.test(trimmed) ? trimmed : `${trimmed}/api/v3`;
}

/**
 * Fetches a remote template through the GitHub contents API
 * (`GET <api>/repos/{org}/{repo}/contents/{path}?ref=`), as go-vela/server
 * compiler/registry/github/template.go `Template` does with go-github `GetContents`; the ref is the
 * part after `@` in the source, none meaning the default branch. Never throws: every failure is a
 * {@link TemplateLoad} the compiler reports at the template's declaration.
 */
async function fetchTemplate(t: TemplateReference, api: string, token: string): Promise<TemplateLoad> {
  const parsed = parseTemplateSource(t.source);
  if (!parsed.ok)
    return {
      ok: false,
      message: `invalid template source provided for ${t.name}: ${parsed.message}`,
      hint: 'write the source as github.com/<org>/<repo>/<path>[@<ref>]',
    };
  const s = parsed.source;
  const at = `${s.org}/${s.repo}/${s.path}${s.ref !== '' ? `@${s.ref}` : ''}`;
  const url = `${api}/repos/${encodeURIComponent(s.org)}/${encodeURIComponent(s.repo)}/contents/${s.path.split('/').map(encodeURIComponent).join('/')}${s.ref !== '' ? `?ref=${encodeURIComponent(s.ref)}` : ''}`;
  const what = `template ${t.name} (${t.source})`;
  let status: number;
  let contentType: string;
  let body: string;
  try {
    const response = await fetch(url, {
      headers: { Authorization: `token ${token}`, Accept: 'application/vnd.github.raw', 'User-Agent': 'berth' },
      signal: AbortSignal.timeout(30_000),
    });
    status = response.status;
    contentType = response.headers.get('content-type') ?? '';
    body = await response.text();
  } catch (error) {
    const cause = (error as { cause?: { code?: string; message?: string } }).cause;
    const reason = (error as Error).name === 'TimeoutError' ? 'no answer within 30s' : (cause?.code ?? cause?.message ?? (error as Error).message);
    return {
      ok: false,
      message: `cannot fetch ${what} from ${api}: ${reason}`,
      hint: `check --github-url and the network, or download it and pass --template-file ${t.name}:<path>`,
    };
  }
  const said = githubMessage(body);
  if (status === 401) {
    return {
      ok: false,
      message: `GitHub at ${api} refused the token (401 Unauthorized${said}) fetching ${what}`,
      hint: 'check --github-token (or VELA_COMPILER_GITHUB_TOKEN): it may be expired, revoked or for another GitHub (a GitHub Enterprise needs --github-url)',
    };
  }
  if (status === 404) {
    return {
      ok: false,
      message: `no Vela template found at ${at} for ${what}: GitHub at ${api} answered 404 Not Found`,
      hint: 'check the org, repo, path and @ref of the source, and that the token can read that repository (GitHub answers 404 for repositories a token cannot see)',
    };
  }
  if (status < 200 || status > 299) {
    return {
      ok: false,
      message: `unexpected error fetching template ${at} for ${what}: GitHub at ${api} answered ${status}${said}`,
      hint:
        status === 403
          ? "the token lacks access to the repository, or the API rate limit was hit; check the token's scopes"
          : `try again later, or download it and pass --template-file ${t.name}:<path>`,
    };
  }
  if (/json/i.test(contentType)) {
    let json: unknown;
    try {
      json = JSON.parse(body);
    } catch {
      return { ok: true, file: t.source, text: body };
    }
    if (Array.isArray(json)) return { ok: false, message: `${at} is a directory, not a template file (${what})`, hint: 'name the template file in it' };
    const content = json as { type?: unknown; content?: unknown; encoding?: unknown };
    if (typeof content.content === 'string' && content.encoding === 'base64')
      return { ok: true, file: t.source, text: Buffer.from(content.content, 'base64').toString('utf8') };
    if (content.type === 'file' && content.encoding === 'none')
      return { ok: false, message: `${what} is too large for the GitHub contents API`, hint: `download it and pass --template-file ${t.name}:<path>` };
    if (typeof content.type === 'string' && content.type !== 'file') return { ok: false, message: `${at} is a ${content.type}, not a template file (${what})` };
  }
  return { ok: true, file: t.source, text: body };
}

/** `: <message>` from a GitHub error body, or nothing. */
function githubMessage(body: string): string {
  try {
    const message = (JSON.parse(body) as { message?: unknown }).message;
    return typeof message === 'string' && message !== '' ? `: ${message.slice(0, 200)}` : '';
  } catch {
    return '';
  }
}

/** The local half of template resolution: `--template-file` names, then `type: file`; undefined for remote sources. */
function localTemplates(file: string, cwd: string, flags: PipelineFlags): (t: TemplateReference) => TemplateLoad | undefined {
  const mapped = new Map<string, string>();
  const bad: string[] = [];
  for (const entry of flags.templateFile ?? []) {
    const colon = entry.indexOf(':');
    if (colon <= 0 || colon === entry.length - 1) bad.push(`--template-file "${entry}" is not NAME:PATH (e.g. --template-file golang:templates/go.yml)`);
    else mapped.set(entry.slice(0, colon), entry.slice(colon + 1));
  }
  if (bad.length > 0) throw new CommandError(bad.join('\n'), EXIT.usage);
  const read = (label: string, absolute: string, what: string): TemplateLoad => {
    try {
      return { ok: true, file: label, text: readFileSync(absolute, 'utf8') };
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      return { ok: false, message: `cannot read ${what} at ${label}: ${code === 'ENOENT' ? 'no such file' : String(error)}` };
    }
  };
  const pipelineDir = path.dirname(path.resolve(cwd, file));
  return (t) => {
    const local = mapped.get(t.name);
    if (local !== undefined) return read(local, path.resolve(cwd, local), `--template-file ${t.name}`);
    if (t.type === 'file') {
      const absolute = path.resolve(pipelineDir, t.source);
      return read(path.relative(cwd, absolute) || absolute, absolute, `template ${t.name} (type: file)`);
    }
    return undefined;
  };
}

/** Pipeline type, strictness and rule data from the flags. */
function flagOptions(flags: PipelineFlags): Omit<FlagOptions, 'templates'> {
  const out: Omit<FlagOptions, 'templates'> = {};
  if (flags.pipelineType !== undefined) out.pipelineType = flags.pipelineType;
  if (flags.strict === true) out.strict = true;
  const rules = ruleFlags(flags);
  if (rules !== undefined) Object.assign(out, rules);
  // Vela compiles with the repo's pipeline type, so VELA_REPO_PIPELINE_TYPE names the type the
  // pipeline was compiled as (S compiler/native/environment.go environment: r.GetPipelineType()).
  if (flags.pipelineType !== undefined) out.metadata = { ...out.metadata, repo: { ...out.metadata?.repo, pipeline_type: flags.pipelineType } };
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
  if (flags.event === undefined && flags.branch === undefined && flags.tag === undefined && flags.target === undefined && flags.comment === undefined)
    return undefined;
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
