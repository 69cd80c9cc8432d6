/**
 * Builtins that drive the shell and its processes: `:` `true` `false` `sleep` `exit` `exec` `cd`
 * `pwd` `export` `unset` `set` `test`/`[` `sh`/`bash` `kill`.
 */
import type { Builtin, Shell } from '../shell.ts';
import { Killed, ShellExit } from '../errors.ts';
import { EMPTY_INPUT, readAll } from '../io.ts';

/** Process and flow control. */
export const CONTROL_BUILTINS = new Map<string, Builtin>();
const register = (names: string[], builtin: Builtin): void => {
  for (const name of names) CONTROL_BUILTINS.set(name, builtin);
};

register([':', 'true'], () => Promise.resolve(0));
register(['false'], () => Promise.resolve(1));

register(['sleep'], async (shell, args, io) => {
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

register(['exit'], (shell, args) => {
  throw new ShellExit(args[0] === undefined ? shell.status : Number(args[0]) & 255);
});

register(['exec'], async (shell, args, io) => {
  if (args.length === 0) return 0;
  throw new ShellExit(await shell.execArgv(args, io));
});

register(['cd'], async (shell, args, io) => {
  const target = shell.resolvePath(args[0] ?? shell.vars.get('HOME') ?? '/');
  if (!shell.host.fs.isDir(target)) {
    await io.stderr.write(`sh: cd: can't cd to ${args[0] ?? ''}: No such file or directory\n`);
    return 2;
  }
  shell.cwd = target;
  return 0;
});

register(['pwd'], async (shell, _args, io) => {
  await io.stdout.write(`${shell.cwd}\n`);
  return 0;
});

register(['export'], (shell, args) => {
  for (const arg of args) {
    const eq = arg.indexOf('=');
    if (eq > 0) shell.vars.set(arg.slice(0, eq), arg.slice(eq + 1));
  }
  return Promise.resolve(0);
});

register(['unset'], (shell, args) => {
  for (const arg of args) if (arg !== '-v' && arg !== '-f') shell.vars.delete(arg);
  return Promise.resolve(0);
});

register(['set'], (shell, args) => {
  for (const arg of args) {
    if (/^-[a-z]*e/.test(arg)) shell.errexit = true;
    if (/^\+[a-z]*e/.test(arg)) shell.errexit = false;
  }
  return Promise.resolve(0);
});

register(['test', '['], async (shell, args, io) => {
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
        return shell.hasCommand(operand);
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

register(['sh', 'bash'], async (shell, args, io) => {
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
  const child = shell.child({ env: shell.vars, cwd: shell.cwd, args: positional.length > 0 ? positional : ['sh'], errexit });
  return child.runScript(script ?? '', stdinScript ? { ...io, stdin: EMPTY_INPUT } : io);
});

register(['kill'], async (shell, args, io) => {
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
