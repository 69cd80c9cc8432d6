/**
 * Builtins that print and filter text: `echo` `printf` `cat` `head` `yes` `seq` `grep` `base64`.
 */
import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import type { Builtin, Shell, Stdio } from '../shell.ts';
import { zeros } from '../devices.ts';
import { inputOf, readAll, type Input } from '../io.ts';
import { formatPrintf, unescape } from '../printf.ts';

/** Printing and text filters. */
export const TEXT_BUILTINS = new Map<string, Builtin>();
const register = (names: string[], builtin: Builtin): void => {
  for (const name of names) TEXT_BUILTINS.set(name, builtin);
};

register(['echo'], async (_shell, args, io) => {
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

register(['printf'], async (_shell, args, io) => {
  const [format, ...rest] = args;
  if (format === undefined) {
    await io.stderr.write('printf: usage: printf FORMAT [ARG]...\n');
    return 1;
  }
  await io.stdout.write(formatPrintf(format, rest));
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

register(['cat'], async (shell, args, io) => {
  const inputs = await openInputs(
    shell,
    'cat',
    args.filter((a) => a === '-' || !a.startsWith('-')),
    io,
  );
  if (typeof inputs === 'number') return inputs;
  for (const input of inputs) {
    for await (const chunk of input) if (!(await io.stdout.write(chunk))) return 141;
  }
  return 0;
});

register(['head'], async (shell, args, io) => {
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

register(['yes'], async (shell, args, io) => {
  const line = Buffer.from(`${args.length > 0 ? args.join(' ') : 'y'}\n`);
  // The same block every time: a consumer that keeps it (the log) holds one copy, not millions.
  const block = Buffer.concat(Array.from({ length: Math.max(1, Math.ceil(65_536 / line.length)) }, () => line));
  for (let i = 0; ; i++) {
    shell.checkAlive();
    if (!(await io.stdout.write(block))) return 141;
    if (i % 16 === 15) await yieldToEventLoop();
  }
});

register(['seq'], async (_shell, args, io) => {
  const numbers = args.map(Number);
  const [first, last] = numbers.length >= 2 ? [numbers[0] ?? 1, numbers[1] ?? 1] : [1, numbers[0] ?? 1];
  let text = '';
  for (let n = first; n <= last; n++) text += `${n}\n`;
  await io.stdout.write(text);
  return 0;
});

register(['grep'], async (shell, args, io) => {
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

register(['base64'], async (shell, args, io) => {
  const decode = args.includes('-d');
  const inputs = await openInputs(
    shell,
    'base64',
    args.filter((a) => !a.startsWith('-')),
    io,
  );
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
