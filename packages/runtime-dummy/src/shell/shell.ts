import path from 'node:path/posix';
import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import type { ContainerFs } from './fs.ts';
import { EMPTY_INPUT, inputOf, NULL_OUTPUT, Pipe, readAll, type Input, type Output } from './io.ts';
import { parseScript, ShellSyntaxError, type AndOr, type Command, type List, type Pipeline, type Redirect, type Word, type WordPart } from './parse.ts';

/** Something a server command (`nc -l`, `httpd`) answers connections with. */
export type Listener = { kind: 'exec'; respond(): Promise<Buffer> } | { kind: 'http'; get(urlPath: string): Buffer | undefined };

/** What a dummy container gives its shell: the kill signal, files, identity and a network. */
export interface ShellHost {
  /** Aborted when the container is killed; every sleep, read and write then ends with {@link Killed}. */
  readonly signal: AbortSignal;
  readonly fs: ContainerFs;
  readonly uid: number;
  readonly gid: number;
  readonly hostname: string;
  /** A fresh process id (1 is the container's first process). */
  nextPid(): number;
  /** Kills the whole container (what `kill -9 1` does here). */
  killContainer(): void;
  /** Resolves a `host:port` of the build's network. */
  connect(host: string, port: number): Listener | 'refused' | 'unknown-host';
  /** Serves `port` until the returned function is called. */
  listen(port: number, listener: Listener): () => void;
}

/** The standard streams of a command. */
export interface Stdio {
  stdin: Input;
  stdout: Output;
  stderr: Output;
}

/** A process killed by a signal: thrown through the shell up to the killed process. */
export class Killed extends Error {
  override readonly name = 'Killed';
  readonly signalNumber: number;
  /** The process that was killed; undefined for the whole container. */
  readonly pid: number | undefined;
  constructor(signalNumber: number, pid?: number) {
    super(`killed by signal ${signalNumber}`);
    this.signalNumber = signalNumber;
    this.pid = pid;
  }
}

/** `exit N`: unwinds to the process boundary, which returns N. */
class ShellExit extends Error {
  override readonly name = 'ShellExit';
  readonly code: number;
  constructor(code: number) {
    super(`exit ${code}`);
    this.code = code;
  }
}

type Builtin = (shell: Shell, args: string[], io: Stdio) => Promise<number>;

/** Options of a {@link Shell}. */
export interface ShellOptions {
  env: Record<string, string> | Map<string, string>;
  cwd: string;
  /** `$0`, `$1`, … */
  args?: string[];
  errexit?: boolean;
  /** The process id; a fresh one from the host unless given (subshells share their parent's). */
  pid?: number;
}

/**
 * One `sh` process of the dummy: variables, working directory, positional arguments and `set -e`.
 * Runs scripts and argv vectors against a {@link ShellHost}.
 */
export class Shell {
  readonly host: ShellHost;
  readonly pid: number;
  readonly vars: Map<string, string>;
  cwd: string;
  args: string[];
  status = 0;
  errexit: boolean;

  constructor(host: ShellHost, options: ShellOptions) {
    this.host = host;
    this.pid = options.pid ?? host.nextPid();
    this.vars = new Map(options.env instanceof Map ? options.env : Object.entries(options.env));
    this.cwd = options.cwd;
    this.args = options.args ?? ['sh'];
    this.errexit = options.errexit ?? false;
  }

  /** Runs a script as this process; resolves with its exit status. Killed is thrown only for other processes or the container. */
  async runScript(source: string, io: Stdio): Promise<number> {
    return this.asProcess(io, async () => {
      let list: List;
      try {
        list = parseScript(source);
      } catch (error) {
        if (error instanceof ShellSyntaxError) {
          await io.stderr.write(`sh: ${error.message}\n`);
          return 2;
        }
        throw error;
      }
      return this.execList(list, io, false);
    });
  }

  /** Runs `argv` as this process's command (a container's entrypoint + commands). */
  async runArgv(argv: string[], io: Stdio): Promise<number> {
    return this.asProcess(io, () => this.execArgv(argv, io));
  }

  /** Runs `work` as this process: `exit` and a kill of this pid become its status. */
  async asProcess(_io: Stdio, work: () => Promise<number>): Promise<number> {
    try {
      return await work();
    } catch (error) {
      if (error instanceof ShellExit) return error.code;
      if (error instanceof Killed && error.pid === this.pid) return 128 + error.signalNumber;
      throw error;
    }
  }

  /** Fails with {@link Killed} when the container was killed. */
  checkAlive(): void {
    if (this.host.signal.aborted) throw new Killed(9);
  }

  /** Sleeps `ms`, ended early by a container kill. */
  async sleep(ms: number): Promise<void> {
    this.checkAlive();
    await new Promise<void>((resolve, reject) => {
      const signal = this.host.signal;
      const onAbort = (): void => {
        clearTimeout(timer);
        reject(new Killed(9));
      };
      const timer = setTimeout(() => {
        signal.removeEventListener('abort', onAbort);
        resolve();
      }, ms);
      signal.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** Waits until the container is killed (a server's main loop). */
  async waitForKill(): Promise<never> {
    this.checkAlive();
    await new Promise<void>((resolve) => this.host.signal.addEventListener('abort', () => resolve(), { once: true }));
    throw new Killed(9);
  }

  resolvePath(file: string): string {
    return path.normalize(file.startsWith('/') ? file : path.join(this.cwd, file));
  }

  // ---- execution ----------------------------------------------------------------------------

  async execList(list: List, io: Stdio, condition: boolean): Promise<number> {
    let status = 0;
    for (const andOr of list) status = await this.execAndOr(andOr, io, condition);
    return status;
  }

  async execAndOr(andOr: AndOr, io: Stdio, condition: boolean): Promise<number> {
    const last = andOr.rest.length;
    let status = await this.execPipeline(andOr.first, io, condition || last > 0);
    let ranLast = last === 0;
    let lastNegated = andOr.first.negate;
    for (let i = 0; i < last; i++) {
      const { op, pipeline } = andOr.rest[i] as { op: '&&' | '||'; pipeline: Pipeline };
      if ((op === '&&') !== (status === 0)) continue;
      const isLast = i === last - 1;
      status = await this.execPipeline(pipeline, io, condition || !isLast);
      ranLast = isLast;
      lastNegated = pipeline.negate;
    }
    this.status = status;
    if (status !== 0 && this.errexit && !condition && ranLast && !lastNegated) throw new ShellExit(status);
    return status;
  }

  async execPipeline(pipeline: Pipeline, io: Stdio, condition: boolean): Promise<number> {
    const commands = pipeline.commands;
    let status: number;
    if (commands.length === 1) {
      status = await this.execCommand(commands[0] as Command, io, condition || pipeline.negate);
    } else {
      const pipes = commands.slice(1).map(() => new Pipe());
      const runs = commands.map(async (command, i) => {
        const stdin = i === 0 ? io.stdin : (pipes[i - 1] as Pipe);
        const stdout = i === commands.length - 1 ? io.stdout : (pipes[i] as Pipe);
        // Each pipeline member runs in a subshell, as in sh.
        const sub = this.subshell();
        try {
          return await sub.asProcess(io, () => sub.execCommand(command, { stdin, stdout, stderr: io.stderr }, true));
        } finally {
          if (i < commands.length - 1) (pipes[i] as Pipe).close();
          if (i > 0) (pipes[i - 1] as Pipe).abandon();
        }
      });
      const statuses = await Promise.all(runs);
      status = statuses.at(-1) ?? 0;
    }
    if (pipeline.negate) status = status === 0 ? 1 : 0;
    this.status = status;
    return status;
  }

  /** A copy of this shell for `( … )`, pipelines and `$( … )`: same variables and directory, same pid. */
  subshell(): Shell {
    const sub = new Shell(this.host, { env: this.vars, cwd: this.cwd, args: [...this.args], errexit: this.errexit, pid: this.pid });
    sub.status = this.status;
    return sub;
  }

  async execCommand(command: Command, io: Stdio, condition: boolean): Promise<number> {
    this.checkAlive();
    if (command.type === 'simple') return this.execSimple(command, io);
    const redirected = await this.applyRedirects(command.redirects, io);
    if (typeof redirected === 'number') return redirected;
    switch (command.type) {
      case 'group': {
        if (!command.subshell) return this.execList(command.body, redirected, condition);
        const sub = this.subshell();
        return sub.asProcess(redirected, () => sub.execList(command.body, redirected, condition));
      }
      case 'if': {
        for (const clause of command.clauses) {
          if ((await this.execList(clause.cond, redirected, true)) === 0) return this.execList(clause.body, redirected, condition);
        }
        return command.otherwise ? this.execList(command.otherwise, redirected, condition) : 0;
      }
      case 'for': {
        const items = command.items ? (await Promise.all(command.items.map((w) => this.expandWord(w)))).flat() : this.args.slice(1);
        let status = 0;
        for (const item of items) {
          this.vars.set(command.name, item);
          status = await this.execList(command.body, redirected, condition);
        }
        return status;
      }
      case 'loop': {
        let status = 0;
        for (;;) {
          const cond = await this.execList(command.cond, redirected, true);
          if ((cond === 0) === command.until) return status;
          status = await this.execList(command.body, redirected, condition);
          await yieldToEventLoop();
        }
      }
    }
  }

  async execSimple(command: Extract<Command, { type: 'simple' }>, io: Stdio): Promise<number> {
    const argv: string[] = [];
    for (const word of command.words) argv.push(...(await this.expandWord(word)));
    const assigned = new Map<string, string>();
    for (const assign of command.assigns) assigned.set(assign.name, (await this.expandWord(assign.value, false)).join(''));
    if (argv.length === 0) {
      for (const [name, value] of assigned) this.vars.set(name, value);
      const redirected = await this.applyRedirects(command.redirects, io);
      return typeof redirected === 'number' ? redirected : 0;
    }
    const redirected = await this.applyRedirects(command.redirects, io);
    if (typeof redirected === 'number') return redirected;
    if (assigned.size === 0) return this.execArgv(argv, redirected);
    const sub = this.subshell();
    for (const [name, value] of assigned) sub.vars.set(name, value);
    return sub.execArgv(argv, redirected);
  }

  /** Runs one command by name (builtins only: this shell has no programs). */
  async execArgv(argv: string[], io: Stdio): Promise<number> {
    this.checkAlive();
    const [name = '', ...args] = argv;
    const builtin = BUILTINS.get(path.basename(name));
    if (!builtin || (name.includes('/') && !/^\/(usr\/)?s?bin\/[^/]+$/.test(name))) {
      await io.stderr.write(`sh: ${name}: not found\n`);
      return 127;
    }
    const status = await builtin(this, args, io);
    this.status = status;
    return status;
  }

  /** Applies redirections to `io`; returns a status (1) and a message when a file cannot be opened. */
  async applyRedirects(redirects: Redirect[], io: Stdio): Promise<Stdio | number> {
    if (redirects.length === 0) return io;
    const out: Stdio = { ...io };
    const fdKey = (fd: number): keyof Stdio => (fd === 0 ? 'stdin' : fd === 2 ? 'stderr' : 'stdout');
    for (const redirect of redirects) {
      if (redirect.op === '<<') {
        const body = redirect.heredoc?.body ?? '';
        out.stdin = inputOf(redirect.heredoc?.expand ? await this.expandText(body) : body);
        continue;
      }
      const target = (await this.expandWord(redirect.target as Word, false)).join('');
      if (redirect.op === '>&' || redirect.op === '<&') {
        if (target === '-') {
          if (redirect.fd === 0) out.stdin = EMPTY_INPUT;
          else out[fdKey(redirect.fd) as 'stdout'] = NULL_OUTPUT;
        } else if (target === '1' || target === '2') {
          out[fdKey(redirect.fd) as 'stdout'] = target === '1' ? out.stdout : out.stderr;
        } else if (target !== '0') {
          await io.stderr.write(`sh: ${target}: bad file descriptor\n`);
          return 1;
        }
        continue;
      }
      const file = this.resolvePath(target);
      if (redirect.op === '<') {
        if (file === '/dev/null') out.stdin = EMPTY_INPUT;
        else if (file === '/dev/zero') out.stdin = zeros(this);
        else {
          const data = this.host.fs.read(file);
          if (data === undefined) {
            await io.stderr.write(`sh: can't open '${target}': No such file or directory\n`);
            return 1;
          }
          out.stdin = inputOf(data);
        }
        continue;
      }
      if (file === '/dev/null') {
        out[fdKey(redirect.fd) as 'stdout'] = NULL_OUTPUT;
        continue;
      }
      if (redirect.fd === 0) continue;
      const fs = this.host.fs;
      if (!fs.isDir(path.dirname(file))) {
        await io.stderr.write(`sh: can't create ${target}: nonexistent directory\n`);
        return 1;
      }
      if (redirect.op === '>') fs.write(file, Buffer.alloc(0), false);
      else if (fs.read(file) === undefined) fs.write(file, Buffer.alloc(0), false);
      out[fdKey(redirect.fd) as 'stdout'] = {
        write: (data) => {
          fs.write(file, typeof data === 'string' ? Buffer.from(data) : data, true);
          return Promise.resolve(true);
        },
      };
    }
    return out;
  }

  // ---- expansion ----------------------------------------------------------------------------

  /** Expands a word into fields (unquoted expansions are split on blanks unless `split` is false). */
  async expandWord(word: Word, split = true): Promise<string[]> {
    const segments: { text: string; split: boolean; quoted: boolean }[] = [];
    for (const part of word.parts) segments.push({ text: await this.expandPart(part), split: split && part.type !== 'lit' && !part.quoted, quoted: part.quoted });
    const fields: string[] = [];
    let current = '';
    let have = false;
    for (const segment of segments) {
      if (!segment.split) {
        current += segment.text;
        have = have || segment.text !== '' || segment.quoted;
        continue;
      }
      const pieces = segment.text.split(/[ \t\n]+/);
      pieces.forEach((piece, k) => {
        if (k > 0 && have) {
          fields.push(current);
          current = '';
          have = false;
        }
        if (piece !== '') {
          current += piece;
          have = true;
        }
      });
    }
    if (have) fields.push(current);
    return split ? fields : [fields.join(' ')];
  }

  async expandPart(part: WordPart): Promise<string> {
    switch (part.type) {
      case 'lit':
        return part.text;
      case 'var': {
        const value = this.variable(part.name);
        if (!part.fallback) return value ?? '';
        const { op, word } = part.fallback;
        const unset = op.startsWith(':') ? value === undefined || value === '' : value === undefined;
        const alternative = async (): Promise<string> => (await Promise.all(word.map((p) => this.expandPart(p)))).join('');
        switch (op.replace(':', '')) {
          case '-':
            return unset ? alternative() : (value ?? '');
          case '=': {
            if (!unset) return value ?? '';
            const assigned = await alternative();
            this.vars.set(part.name, assigned);
            return assigned;
          }
          case '+':
            return unset ? '' : alternative();
          default:
            if (unset) throw new ShellExit(1);
            return value ?? '';
        }
      }
      case 'arith':
        return String(evaluateArithmetic(await this.expandText(part.expr), this));
      case 'cmd': {
        const captured: Buffer[] = [];
        const sub = this.subshell();
        await sub.asProcess({ stdin: EMPTY_INPUT, stdout: NULL_OUTPUT, stderr: NULL_OUTPUT }, async () => {
          const list = parseScript(part.script);
          return sub.execList(list, { stdin: EMPTY_INPUT, stdout: { write: (d) => (captured.push(Buffer.from(d)), Promise.resolve(true)) }, stderr: NULL_OUTPUT }, false);
        });
        this.status = sub.status;
        return Buffer.concat(captured).toString().replace(/\n+$/, '');
      }
    }
  }

  /** Expands `$…` in free text (here-documents, arithmetic). */
  async expandText(text: string): Promise<string> {
    const word = parseScript(`: "${text.replace(/(["\\`])/g, '\\$1')}"`)[0]?.first.commands[0];
    if (word?.type !== 'simple' || !word.words[1]) return text;
    return (await this.expandWord(word.words[1], false)).join('');
  }

  variable(name: string): string | undefined {
    if (name === '?') return String(this.status);
    if (name === '$') return String(this.pid);
    if (name === '#') return String(Math.max(0, this.args.length - 1));
    if (name === '@' || name === '*') return this.args.slice(1).join(' ');
    if (name === '-') return this.errexit ? 'e' : '';
    if (name === '!') return '';
    if (/^[0-9]+$/.test(name)) return this.args[Number(name)];
    return this.vars.get(name);
  }
}

/** `$(( ))`: integers, + - * / %, comparisons, parentheses and variable names. */
function evaluateArithmetic(expr: string, shell: Shell): number {
  const tokens = expr.match(/\d+|[A-Za-z_][A-Za-z0-9_]*|==|!=|<=|>=|&&|\|\||[-+*/%()<>!]/g) ?? [];
  let pos = 0;
  const next = (): string | undefined => tokens[pos++];
  const peek = (): string | undefined => tokens[pos];
  const primary = (): number => {
    const t = next();
    if (t === undefined) throw new ShellExit(2);
    if (t === '(') {
      const value = binary(0);
      next();
      return value;
    }
    if (t === '-') return -primary();
    if (t === '+') return primary();
    if (t === '!') return primary() === 0 ? 1 : 0;
    if (/^\d+$/.test(t)) return Number(t);
    return Number(shell.variable(t) ?? 0) || 0;
  };
  const precedence: Record<string, number> = { '||': 1, '&&': 2, '==': 3, '!=': 3, '<': 4, '>': 4, '<=': 4, '>=': 4, '+': 5, '-': 5, '*': 6, '/': 6, '%': 6 };
  const binary = (min: number): number => {
    let left = primary();
    for (;;) {
      const op = peek();
      const p = op === undefined ? undefined : precedence[op];
      if (op === undefined || p === undefined || p <= min - 1 || p < min) return left;
      next();
      const right = binary(p + 1);
      left = applyOp(op, left, right);
    }
  };
  return binary(0);
}

function applyOp(op: string, a: number, b: number): number {
  switch (op) {
    case '+':
      return a + b;
    case '-':
      return a - b;
    case '*':
      return a * b;
    case '/':
      return Math.trunc(a / b);
    case '%':
      return a % b;
    case '==':
      return a === b ? 1 : 0;
    case '!=':
      return a !== b ? 1 : 0;
    case '<':
      return a < b ? 1 : 0;
    case '>':
      return a > b ? 1 : 0;
    case '<=':
      return a <= b ? 1 : 0;
    case '>=':
      return a >= b ? 1 : 0;
    case '&&':
      return a && b ? 1 : 0;
    default:
      return a || b ? 1 : 0;
  }
}

/** An endless input of zero bytes (`/dev/zero`). */
function zeros(shell: Shell): Input {
  const block = Buffer.alloc(65_536);
  return {
    async *[Symbol.asyncIterator]() {
      for (let i = 0; ; i++) {
        shell.checkAlive();
        if (i % 16 === 15) await yieldToEventLoop();
        yield block;
      }
    },
  };
}

// ---- builtins -------------------------------------------------------------------------------

const BUILTINS = new Map<string, Builtin>();
const registerBuiltin = (names: string[], builtin: Builtin): void => {
  for (const name of names) BUILTINS.set(name, builtin);
};

/** Names of the commands the dummy's shell knows. */
export function shellCommands(): string[] {
  return [...BUILTINS.keys()].sort();
}

registerBuiltin([':', 'true'], () => Promise.resolve(0));
registerBuiltin(['false'], () => Promise.resolve(1));

registerBuiltin(['echo'], async (_shell, args, io) => {
  let newline = true;
  let escapes = false;
  while (args[0] !== undefined && /^-[neE]+$/.test(args[0])) {
    const flags = args.shift() as string;
    if (flags.includes('n')) newline = false;
    if (flags.includes('e')) escapes = true;
    if (flags.includes('E')) escapes = false;
  }
  let text = args.join(' ');
  if (escapes) text = unescape(text);
  await io.stdout.write(newline ? `${text}\n` : text);
  return 0;
});

registerBuiltin(['printf'], async (_shell, args, io) => {
  const [format, ...rest] = args;
  if (format === undefined) {
    await io.stderr.write('printf: usage: printf FORMAT [ARG]...\n');
    return 1;
  }
  await io.stdout.write(formatPrintf(format, rest));
  return 0;
});

registerBuiltin(['sleep'], async (shell, args, io) => {
  let ms = 0;
  for (const arg of args) {
    const match = /^(\d+(?:\.\d*)?|\.\d+)([smhd]?)$/.exec(arg);
    if (!match) {
      await io.stderr.write(`sleep: invalid number '${arg}'\n`);
      return 1;
    }
    const unit = { '': 1000, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }[match[2] as '' | 's' | 'm' | 'h' | 'd'];
    ms += Number(match[1]) * unit;
  }
  await shell.sleep(ms);
  return 0;
});

registerBuiltin(['exit'], (shell, args) => {
  throw new ShellExit(args[0] === undefined ? shell.status : Number(args[0]) & 255);
});

registerBuiltin(['exec'], async (shell, args, io) => {
  if (args.length === 0) return 0;
  throw new ShellExit(await shell.execArgv(args, io));
});

registerBuiltin(['cd'], async (shell, args, io) => {
  const target = shell.resolvePath(args[0] ?? shell.vars.get('HOME') ?? '/');
  if (!shell.host.fs.isDir(target)) {
    await io.stderr.write(`sh: cd: can't cd to ${args[0] ?? ''}: No such file or directory\n`);
    return 2;
  }
  shell.cwd = target;
  return 0;
});

registerBuiltin(['pwd'], async (shell, _args, io) => {
  await io.stdout.write(`${shell.cwd}\n`);
  return 0;
});

registerBuiltin(['export'], (shell, args) => {
  for (const arg of args) {
    const eq = arg.indexOf('=');
    if (eq > 0) shell.vars.set(arg.slice(0, eq), arg.slice(eq + 1));
  }
  return Promise.resolve(0);
});

registerBuiltin(['unset'], (shell, args) => {
  for (const arg of args) if (arg !== '-v' && arg !== '-f') shell.vars.delete(arg);
  return Promise.resolve(0);
});

registerBuiltin(['set'], (shell, args) => {
  for (const arg of args) {
    if (/^-[a-z]*e/.test(arg)) shell.errexit = true;
    if (/^\+[a-z]*e/.test(arg)) shell.errexit = false;
  }
  return Promise.resolve(0);
});

registerBuiltin(['env', 'printenv'], async (shell, args, io) => {
  if (args.length > 0 && !args[0]?.includes('=')) {
    const value = shell.vars.get(args[0] as string);
    if (value === undefined) return 1;
    await io.stdout.write(`${value}\n`);
    return 0;
  }
  const sub = shell.subshell();
  while (args[0]?.includes('=')) {
    const arg = args.shift() as string;
    sub.vars.set(arg.slice(0, arg.indexOf('=')), arg.slice(arg.indexOf('=') + 1));
  }
  if (args.length > 0) return sub.execArgv(args, io);
  await io.stdout.write([...sub.vars].map(([k, v]) => `${k}=${v}\n`).join(''));
  return 0;
});

registerBuiltin(['id'], async (shell, args, io) => {
  const { uid, gid } = shell.host;
  const user = uid === 0 ? 'root' : String(uid);
  const group = gid === 0 ? 'root' : String(gid);
  const names = args.some((a) => /^-[a-z]*n/.test(a));
  let text: string;
  if (args.some((a) => /^-[a-z]*u/.test(a))) text = names ? user : String(uid);
  else if (args.some((a) => /^-[a-z]*g/.test(a))) text = names ? group : String(gid);
  else text = `uid=${uid}${uid === 0 ? '(root)' : ''} gid=${gid}${gid === 0 ? '(root)' : ''} groups=${gid}${gid === 0 ? '(root)' : ''}`;
  await io.stdout.write(`${text}\n`);
  return 0;
});

registerBuiltin(['whoami'], async (shell, _args, io) => {
  await io.stdout.write(`${shell.host.uid === 0 ? 'root' : String(shell.host.uid)}\n`);
  return 0;
});

registerBuiltin(['hostname'], async (shell, _args, io) => {
  await io.stdout.write(`${shell.host.hostname}\n`);
  return 0;
});

registerBuiltin(['uname'], async (_shell, _args, io) => {
  await io.stdout.write('Linux\n');
  return 0;
});

/** The inputs named by `files` (stdin for none or `-`), or a status after reporting a missing file. */
async function openInputs(shell: Shell, command: string, files: string[], io: Stdio): Promise<Input[] | number> {
  if (files.length === 0) return [io.stdin];
  const inputs: Input[] = [];
  for (const file of files) {
    if (file === '-') {
      inputs.push(io.stdin);
      continue;
    }
    const resolved = shell.resolvePath(file);
    if (resolved === '/dev/zero') {
      inputs.push(zeros(shell));
      continue;
    }
    const data = resolved === '/dev/null' ? Buffer.alloc(0) : shell.host.fs.read(resolved);
    if (data === undefined) {
      await io.stderr.write(`${command}: can't open '${file}': No such file or directory\n`);
      return 1;
    }
    inputs.push(inputOf(data));
  }
  return inputs;
}

registerBuiltin(['cat'], async (shell, args, io) => {
  const inputs = await openInputs(shell, 'cat', args.filter((a) => a === '-' || !a.startsWith('-')), io);
  if (typeof inputs === 'number') return inputs;
  for (const input of inputs) {
    for await (const chunk of input) if (!(await io.stdout.write(chunk))) return 141;
  }
  return 0;
});

registerBuiltin(['head'], async (shell, args, io) => {
  let bytes: number | undefined;
  let lines = 10;
  const files: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as string;
    if (arg === '-c') bytes = Number(args[++i]);
    else if (arg.startsWith('-c')) bytes = Number(arg.slice(2));
    else if (arg === '-n') lines = Number(args[++i]);
    else if (/^-n?\d+$/.test(arg)) lines = Number(arg.replace(/^-n?/, ''));
    else files.push(arg);
  }
  const inputs = await openInputs(shell, 'head', files, io);
  if (typeof inputs === 'number') return inputs;
  for (const input of inputs) {
    let left = bytes ?? lines;
    if (left <= 0) continue;
    for await (const chunk of input) {
      let piece = chunk;
      if (bytes !== undefined) {
        if (piece.length > left) piece = piece.subarray(0, left);
        left -= piece.length;
      } else {
        let end = 0;
        while (left > 0 && end < piece.length) {
          const newline = piece.indexOf(0x0a, end);
          if (newline < 0) {
            end = piece.length;
            break;
          }
          end = newline + 1;
          left--;
        }
        piece = piece.subarray(0, end);
      }
      if (!(await io.stdout.write(piece))) return 141;
      if (left <= 0) break;
    }
  }
  return 0;
});

registerBuiltin(['yes'], async (shell, args, io) => {
  const line = Buffer.from(`${args.length > 0 ? args.join(' ') : 'y'}\n`);
  // The same block every time: a consumer that keeps it (the log) holds one copy, not millions.
  const block = Buffer.concat(Array.from({ length: Math.max(1, Math.ceil(65_536 / line.length)) }, () => line));
  for (let i = 0; ; i++) {
    shell.checkAlive();
    if (!(await io.stdout.write(block))) return 141;
    if (i % 16 === 15) await yieldToEventLoop();
  }
});

registerBuiltin(['seq'], async (_shell, args, io) => {
  const numbers = args.map(Number);
  const [first, last] = numbers.length >= 2 ? [numbers[0] ?? 1, numbers[1] ?? 1] : [1, numbers[0] ?? 1];
  let text = '';
  for (let n = first; n <= last; n++) text += `${n}\n`;
  await io.stdout.write(text);
  return 0;
});

registerBuiltin(['wc'], async (shell, args, io) => {
  const inputs = await openInputs(shell, 'wc', args.filter((a) => !a.startsWith('-')), io);
  if (typeof inputs === 'number') return inputs;
  let bytes = 0;
  let lines = 0;
  for (const input of inputs) {
    for await (const chunk of input) {
      bytes += chunk.length;
      for (const byte of chunk) if (byte === 0x0a) lines++;
    }
  }
  const text = args.includes('-c') ? `${bytes}` : args.includes('-l') ? `${lines}` : `${lines} ${bytes}`;
  await io.stdout.write(`${text}\n`);
  return 0;
});

registerBuiltin(['grep'], async (shell, args, io) => {
  const flags = args.filter((a) => /^-[qvFE]+$/.test(a)).join('');
  const [pattern, ...files] = args.filter((a) => !/^-[qvFE]+$/.test(a));
  if (pattern === undefined) return 2;
  const inputs = await openInputs(shell, 'grep', files, io);
  if (typeof inputs === 'number') return 2;
  const regex = flags.includes('F') ? undefined : new RegExp(pattern);
  let found = false;
  for (const input of inputs) {
    const text = (await readAll(input)).toString();
    for (const line of text.split('\n').slice(0, text.endsWith('\n') ? -1 : undefined)) {
      const matches = regex ? regex.test(line) : line.includes(pattern);
      if (matches !== flags.includes('v')) {
        found = true;
        if (!flags.includes('q')) await io.stdout.write(`${line}\n`);
      }
    }
  }
  return found ? 0 : 1;
});

registerBuiltin(['base64'], async (shell, args, io) => {
  const decode = args.includes('-d');
  const inputs = await openInputs(shell, 'base64', args.filter((a) => !a.startsWith('-')), io);
  if (typeof inputs === 'number') return inputs;
  const data = Buffer.concat(await Promise.all(inputs.map(readAll)));
  if (decode) {
    await io.stdout.write(Buffer.from(data.toString().replace(/\s+/g, ''), 'base64'));
  } else {
    const encoded = data.toString('base64');
    await io.stdout.write(`${encoded.replace(/(.{76})/g, '$1\n').replace(/\n$/, '')}\n`);
  }
  return 0;
});

registerBuiltin(['mkdir'], async (shell, args, io) => {
  const parents = args.includes('-p');
  for (const dir of args.filter((a) => !a.startsWith('-'))) {
    const resolved = shell.resolvePath(dir);
    if (!parents && !shell.host.fs.isDir(path.dirname(resolved))) {
      await io.stderr.write(`mkdir: can't create directory '${dir}': No such file or directory\n`);
      return 1;
    }
    shell.host.fs.mkdir(resolved);
  }
  return 0;
});

registerBuiltin(['rm'], async (shell, args, io) => {
  const force = args.some((a) => /^-[a-z]*f/.test(a));
  for (const file of args.filter((a) => !a.startsWith('-'))) {
    if (!shell.host.fs.remove(shell.resolvePath(file)) && !force) {
      await io.stderr.write(`rm: can't remove '${file}': No such file or directory\n`);
      return 1;
    }
  }
  return 0;
});

registerBuiltin(['touch'], (shell, args) => {
  for (const file of args.filter((a) => !a.startsWith('-'))) {
    const resolved = shell.resolvePath(file);
    if (shell.host.fs.read(resolved) === undefined) shell.host.fs.write(resolved, Buffer.alloc(0), false);
  }
  return Promise.resolve(0);
});

registerBuiltin(['chmod', 'chown', 'sync'], () => Promise.resolve(0));

registerBuiltin(['test', '['], async (shell, args, io) => {
  const operands = args.at(-1) === ']' && args.length > 0 ? args.slice(0, -1) : args;
  try {
    return evaluateTest(shell, operands) ? 0 : 1;
  } catch (error) {
    await io.stderr.write(`sh: ${(error as Error).message}\n`);
    return 2;
  }
});

function evaluateTest(shell: Shell, args: string[]): boolean {
  if (args[0] === '!') return !evaluateTest(shell, args.slice(1));
  if (args.length === 0) return false;
  if (args.length === 1) return (args[0] ?? '') !== '';
  if (args.length === 2) {
    const [op, operand = ''] = args as [string, string];
    const file = shell.resolvePath(operand);
    switch (op) {
      case '-n':
        return operand !== '';
      case '-z':
        return operand === '';
      case '-e':
      case '-r':
      case '-w':
        return shell.host.fs.exists(file);
      case '-f':
        return shell.host.fs.read(file) !== undefined;
      case '-d':
        return shell.host.fs.isDir(file);
      case '-s':
        return (shell.host.fs.read(file)?.length ?? 0) > 0;
      case '-x':
        return BUILTINS.has(path.basename(operand));
      default:
        throw new Error(`${op}: unknown operand`);
    }
  }
  const [left = '', op, right = ''] = args;
  switch (op) {
    case '=':
    case '==':
      return left === right;
    case '!=':
      return left !== right;
    case '-eq':
      return Number(left) === Number(right);
    case '-ne':
      return Number(left) !== Number(right);
    case '-lt':
      return Number(left) < Number(right);
    case '-le':
      return Number(left) <= Number(right);
    case '-gt':
      return Number(left) > Number(right);
    case '-ge':
      return Number(left) >= Number(right);
    default:
      throw new Error(`${op ?? ''}: unknown operand`);
  }
}

registerBuiltin(['sh', 'ash', 'bash'], async (shell, args, io) => {
  let errexit = false;
  let script: string | undefined;
  let positional: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as string;
    if (arg === '-c') {
      script = args[i + 1] ?? '';
      positional = args.slice(i + 2);
      break;
    }
    if (/^-[a-z]+$/.test(arg)) {
      if (arg.includes('e')) errexit = true;
      if (arg.includes('c')) {
        script = args[i + 1] ?? '';
        positional = args.slice(i + 2);
        break;
      }
      continue;
    }
    const data = shell.host.fs.read(shell.resolvePath(arg));
    if (data === undefined) {
      await io.stderr.write(`sh: can't open '${arg}': No such file or directory\n`);
      return 127;
    }
    script = data.toString();
    positional = [arg, ...args.slice(i + 1)];
    break;
  }
  const stdinScript = script === undefined;
  if (stdinScript) script = (await readAll(io.stdin)).toString();
  const child = new Shell(shell.host, { env: shell.vars, cwd: shell.cwd, args: positional.length > 0 ? positional : ['sh'], errexit });
  return child.runScript(script ?? '', stdinScript ? { ...io, stdin: EMPTY_INPUT } : io);
});

registerBuiltin(['kill'], async (shell, args, io) => {
  let signalNumber = 15;
  const pids: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as string;
    if (arg === '-s') signalNumber = signalNumberOf(args[++i] ?? 'TERM');
    else if (/^-\w+$/.test(arg)) signalNumber = signalNumberOf(arg.slice(1));
    else pids.push(arg);
  }
  for (const pid of pids) {
    const n = Number(pid);
    if (n === shell.pid) throw new Killed(signalNumber, n);
    if (n === 1) {
      // PID 1 ignores signals it has no handler for, except from outside: like a real container.
      if (signalNumber === 9) shell.host.killContainer();
      continue;
    }
    await io.stderr.write(`sh: can't kill pid ${pid}: No such process\n`);
    return 1;
  }
  return 0;
});

function signalNumberOf(name: string): number {
  const named: Record<string, number> = { KILL: 9, TERM: 15, INT: 2, HUP: 1, QUIT: 3, USR1: 10, USR2: 12 };
  return /^\d+$/.test(name) ? Number(name) : (named[name.replace(/^SIG/, '')] ?? 15);
}

registerBuiltin(['nc', 'netcat'], async (shell, args, io) => {
  let listen = 0;
  let keep = false;
  let port: number | undefined;
  let program: string[] | undefined;
  const positional: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as string;
    if (arg === '-e') {
      program = args.slice(i + 1);
      break;
    }
    if (arg === '-p') port = Number(args[++i]);
    else if (arg === '-w' || arg === '-i') i++;
    else if (/^-[lk]+$/.test(arg)) {
      listen += [...arg].filter((c) => c === 'l').length;
      keep = keep || arg.includes('k');
    } else positional.push(arg);
  }
  if (listen > 0) {
    if (port === undefined) {
      await io.stderr.write('nc: -l needs -p PORT\n');
      return 1;
    }
    let served = (): void => undefined;
    const once = new Promise<void>((resolve) => (served = resolve));
    const respond = async (): Promise<Buffer> => {
      const captured: Buffer[] = [];
      if (program && program.length > 0) {
        const child = new Shell(shell.host, { env: shell.vars, cwd: shell.cwd });
        await child.runArgv(program, {
          stdin: EMPTY_INPUT,
          stdout: { write: (d) => (captured.push(Buffer.from(d)), Promise.resolve(true)) },
          stderr: io.stderr,
        });
      }
      served();
      return Buffer.concat(captured);
    };
    const unlisten = shell.host.listen(port, { kind: 'exec', respond });
    try {
      if (listen > 1 || keep) return await shell.waitForKill();
      await Promise.race([once, shell.waitForKill()]);
      return 0;
    } finally {
      unlisten();
    }
  }
  const [host, portText] = positional;
  const target = host === undefined ? undefined : shell.host.connect(host, Number(portText));
  if (target === undefined || target === 'unknown-host') {
    await io.stderr.write(`nc: bad address '${host ?? ''}'\n`);
    return 1;
  }
  if (target === 'refused') {
    await io.stderr.write(`nc: can't connect to remote host (${host ?? ''}): Connection refused\n`);
    return 1;
  }
  if (target.kind === 'exec') await io.stdout.write(await target.respond());
  return 0;
});

registerBuiltin(['wget'], async (shell, args, io) => {
  let output: string | undefined;
  let quiet = false;
  let url: string | undefined;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as string;
    if (arg === '-O') output = args[++i];
    else if (arg === '-T' || arg === '-t') i++;
    else if (/^-[qS]+$/.test(arg)) quiet = quiet || arg.includes('q');
    else url = arg;
  }
  const match = /^http:\/\/([^/:]+)(?::(\d+))?(\/.*)?$/.exec(url ?? '');
  if (!match) {
    await io.stderr.write(`wget: bad address '${url ?? ''}'\n`);
    return 1;
  }
  const [, host = '', port = '80', urlPath = '/'] = match;
  const target = shell.host.connect(host, Number(port));
  if (target === 'unknown-host' || target === 'refused') {
    await io.stderr.write(target === 'refused' ? `wget: can't connect to remote host: Connection refused\n` : `wget: bad address '${host}'\n`);
    return 1;
  }
  const body = target.kind === 'http' ? target.get(urlPath) : undefined;
  if (body === undefined) {
    await io.stderr.write(target.kind === 'http' ? 'wget: server returned error: HTTP/1.1 404 Not Found\n' : 'wget: bad header line\n');
    return 1;
  }
  if (!quiet) await io.stderr.write(`Connecting to ${host}:${port}\n`);
  if (output === '-') await io.stdout.write(body);
  else shell.host.fs.write(shell.resolvePath(output ?? path.basename(urlPath === '/' ? 'index.html' : urlPath)), body, false);
  return 0;
});

registerBuiltin(['httpd'], async (shell, args, io) => {
  let port = 80;
  let home = '.';
  let foreground = false;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as string;
    if (arg === '-p') port = Number((args[++i] ?? '80').split(':').at(-1));
    else if (arg === '-h') home = args[++i] ?? '.';
    else if (/^-[a-z]*f/.test(arg)) foreground = true;
  }
  const root = shell.resolvePath(home);
  const unlisten = shell.host.listen(port, {
    kind: 'http',
    get: (urlPath) => {
      const file = path.join(root, path.normalize(urlPath));
      return shell.host.fs.read(shell.host.fs.isDir(file) ? path.join(file, 'index.html') : file);
    },
  });
  if (!foreground) return 0;
  try {
    return await shell.waitForKill();
  } finally {
    unlisten();
    await io.stderr.write('');
  }
});

function unescape(text: string): string {
  return text.replace(/\\(0[0-7]{0,3}|[\\abfnrtv]|c)/g, (_m, e: string) => {
    if (e.startsWith('0')) return String.fromCharCode(parseInt(e.slice(1) || '0', 8));
    return { '\\': '\\', a: '\x07', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t', v: '\v', c: '' }[e] ?? e;
  });
}

/** printf(1): `%s %d %i %b %c %x %o %%` with flags and width; the format repeats while arguments remain. */
export function formatPrintf(format: string, args: string[]): string {
  let out = '';
  let index = 0;
  do {
    let consumed = false;
    out += format.replace(/%([-+ 0#]*)(\d*)(?:\.(\d+))?([sdibcxXo%])|\\(0[0-7]{0,3}|[\\abfnrtv"])/g, (match, flags: string, width: string, precision: string | undefined, conversion: string | undefined, escape: string | undefined) => {
      if (escape !== undefined) return escape === '"' ? '"' : unescape(`\\${escape}`);
      if (conversion === '%') return '%';
      const arg = args[index];
      if (arg !== undefined) {
        index++;
        consumed = true;
      }
      let text: string;
      switch (conversion) {
        case 'd':
        case 'i':
          text = String(Math.trunc(Number(arg ?? 0)) || 0);
          break;
        case 'x':
        case 'X':
        case 'o': {
          const n = Math.trunc(Number(arg ?? 0)) || 0;
          text = n.toString(conversion === 'o' ? 8 : 16);
          if (conversion === 'X') text = text.toUpperCase();
          break;
        }
        case 'b':
          text = unescape(arg ?? '');
          break;
        case 'c':
          text = (arg ?? '').slice(0, 1);
          break;
        default:
          text = arg ?? '';
          if (precision !== undefined) text = text.slice(0, Number(precision));
      }
      const size = Number(width || 0);
      if (text.length < size) {
        text = flags.includes('-') ? text.padEnd(size) : flags.includes('0') && conversion !== 's' ? text.padStart(size, '0') : text.padStart(size);
      }
      return match === '' ? '' : text;
    });
    if (!consumed) break;
  } while (index < args.length);
  return out;
}
