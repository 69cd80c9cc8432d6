import path from 'node:path/posix';
import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import type { ContainerFs } from './fs.ts';
import { evaluateArithmetic } from './arithmetic.ts';
import { findBuiltin } from './builtins/index.ts';
import { zeros } from './devices.ts';
import { Killed, ShellExit } from './errors.ts';
import { EMPTY_INPUT, inputOf, NULL_OUTPUT, Pipe, type Input, type Output } from './io.ts';
import { parseScript, ShellSyntaxError, type AndOr, type Command, type List, type Pipeline, type Redirect, type Word, type WordPart } from './parse.ts';

export { Killed } from './errors.ts';

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

/** A command of the shell (this shell has no programs: every command is built in). */
export type Builtin = (shell: Shell, args: string[], io: Stdio) => Promise<number>;

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

  /** A new process on the same host (`sh -c`, `nc -e`): a fresh pid unless `options.pid` says. */
  child(options: ShellOptions): Shell {
    return new Shell(this.host, options);
  }

  /** Whether `name` is a command this shell knows (`test -x`). */
  hasCommand(name: string): boolean {
    return findBuiltin(path.basename(name)) !== undefined;
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
    const builtin = findBuiltin(path.basename(name));
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
    for (const part of word.parts)
      segments.push({ text: await this.expandPart(part), split: split && part.type !== 'lit' && !part.quoted, quoted: part.quoted });
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
        return String(evaluateArithmetic(await this.expandText(part.expr), (name) => this.variable(name)));
      case 'cmd': {
        const captured: Buffer[] = [];
        const sub = this.subshell();
        await sub.asProcess({ stdin: EMPTY_INPUT, stdout: NULL_OUTPUT, stderr: NULL_OUTPUT }, async () => {
          const list = parseScript(part.script);
          return sub.execList(
            list,
            { stdin: EMPTY_INPUT, stdout: { write: (d) => (captured.push(Buffer.from(d)), Promise.resolve(true)) }, stderr: NULL_OUTPUT },
            false,
          );
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
