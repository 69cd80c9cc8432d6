/**
 * Builtins that describe the process and its container: `env` `id` `hostname`.
 */
import type { Builtin } from '../shell.ts';

/** Environment and identity. */
export const SYSTEM_BUILTINS = new Map<string, Builtin>();
const register = (names: string[], builtin: Builtin): void => {
  for (const name of names) SYSTEM_BUILTINS.set(name, builtin);
};

register(['env'], async (shell, args, io) => {
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

register(['id'], async (shell, args, io) => {
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

register(['hostname'], async (shell, _args, io) => {
  await io.stdout.write(`${shell.host.hostname}\n`);
  return 0;
});
