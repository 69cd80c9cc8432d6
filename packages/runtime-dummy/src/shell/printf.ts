/**
 * printf(1) and `echo -e` escapes of the dummy's shell.
 */

/** Replaces backslash escapes (`\n`, `\t`, `\0NNN`, `\c`, …) as `echo -e` and `printf %b` do. */
export function unescape(text: string): string {
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
    out += format.replace(
      /%([-+ 0#]*)(\d*)(?:\.(\d+))?([sdibcxXo%])|\\(0[0-7]{0,3}|[\\abfnrtv"])/g,
      (match, flags: string, width: string, precision: string | undefined, conversion: string | undefined, escape: string | undefined) => {
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
      },
    );
    if (!consumed) break;
  } while (index < args.length);
  return out;
}
