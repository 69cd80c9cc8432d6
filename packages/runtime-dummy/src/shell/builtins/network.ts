/**
 * Builtins on the build's network: `nc` (client and `-l` server), `wget`, `httpd`.
 */
import path from 'node:path/posix';
import type { Builtin } from '../shell.ts';
import { EMPTY_INPUT } from '../io.ts';

/** Network clients and servers. */
export const NETWORK_BUILTINS = new Map<string, Builtin>();
const register = (names: string[], builtin: Builtin): void => {
  for (const name of names) NETWORK_BUILTINS.set(name, builtin);
};

register(['nc'], async (shell, args, io) => {
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
        const child = shell.child({ env: shell.vars, cwd: shell.cwd });
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

register(['wget'], async (shell, args, io) => {
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

register(['httpd'], async (shell, args, io) => {
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
