/**
 * Builtins that change files: `mkdir` `rm` `touch` `chmod` (a no-op: the dummy has no modes).
 */
import path from 'node:path/posix';
import type { Builtin } from '../shell.ts';

/** File system commands. */
export const FILE_BUILTINS = new Map<string, Builtin>();
const register = (names: string[], builtin: Builtin): void => {
  for (const name of names) FILE_BUILTINS.set(name, builtin);
};

register(['mkdir'], async (shell, args, io) => {
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

register(['rm'], async (shell, args, io) => {
  const force = args.some((a) => /^-[a-z]*f/.test(a));
  for (const file of args.filter((a) => !a.startsWith('-'))) {
    if (!shell.host.fs.remove(shell.resolvePath(file)) && !force) {
      await io.stderr.write(`rm: can't remove '${file}': No such file or directory\n`);
      return 1;
    }
  }
  return 0;
});

register(['touch'], (shell, args) => {
  for (const file of args.filter((a) => !a.startsWith('-'))) {
    const resolved = shell.resolvePath(file);
    if (shell.host.fs.read(resolved) === undefined) shell.host.fs.write(resolved, Buffer.alloc(0), false);
  }
  return Promise.resolve(0);
});

register(['chmod'], () => Promise.resolve(0));
