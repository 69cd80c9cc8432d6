/**
 * `${VAR}` substitution as Vela's compiler does it (drone/envsubst with Vela's lookup).
 */
import { goQuote } from './script.ts';

/** A substitution that cannot be parsed (`${` without `}`, `${}`). */
export class SubstitutionError extends Error {
  override readonly name = 'SubstitutionError';
}

const NAME_CHAR = /[\p{L}\p{N}_]/u;

function applyFunction(value: string, op: string, arg: string): string {
  switch (op) {
    case ':-':
    case ':=':
    case ':?':
    case '-':
    case '=':
    case '?':
      return value === '' ? arg : value;
    case ':+':
    case '+':
      return value === '' ? '' : arg;
    case '^^':
      return value.toUpperCase();
    case ',,':
      return value.toLowerCase();
    case '^':
      return value.charAt(0).toUpperCase() + value.slice(1);
    case ',':
      return value.charAt(0).toLowerCase() + value.slice(1);
    case ':': {
      const [pos = '0', len] = arg.split(':');
      const start = Math.max(0, Number.parseInt(pos, 10) || 0);
      if (len === undefined) return value.slice(start);
      return value.slice(start, start + (Number.parseInt(len, 10) || 0));
    }
    default:
      // Pattern removal and replacement (`#`, `%`, `/`) are rare in pipelines: keep the value.
      return value;
  }
}

/**
 * drone/envsubst's `Eval`: replaces `${NAME}` (and `${NAME:-default}`, `${NAME^^}`, `${#NAME}`,
 * `${NAME:offset:length}` …) using `lookup`; `$$` is an escaped `$`; a `$` not followed by `{` is
 * kept. Throws {@link SubstitutionError} for `${` without `}` and `${}`.
 */
export function envsubst(input: string, lookup: (name: string) => string): string {
  let out = '';
  let i = 0;
  while (i < input.length) {
    const c = input[i];
    if (c === '$' && input[i + 1] === '$') {
      out += '$';
      i += 2;
      continue;
    }
    if (c === '$' && input[i + 1] === '{') {
      let j = i + 2;
      let length = false;
      if (input[j] === '#') {
        length = true;
        j++;
      }
      const nameStart = j;
      while (j < input.length && NAME_CHAR.test(input[j] ?? '')) j++;
      const name = input.slice(nameStart, j);
      if (name === '') throw new SubstitutionError(`unable to parse variable name in ${JSON.stringify(input)}`);
      // Find the closing brace, allowing nested ${…} in the argument.
      let depth = 0;
      let k = j;
      for (; k < input.length; k++) {
        if (input[k] === '$' && input[k + 1] === '{') {
          depth++;
          k++;
        } else if (input[k] === '}') {
          if (depth === 0) break;
          depth--;
        }
      }
      if (k >= input.length) throw new SubstitutionError(`missing closing brace in ${JSON.stringify(input)}`);
      const rest = input.slice(j, k);
      const value = lookup(name);
      if (length) {
        out += String(Array.from(value).length);
      } else if (rest === '') {
        out += value;
      } else {
        const op = /^(:[-=?+]|[-=?+]|\^\^|,,|\^|,|:|##|#|%%|%|\/\/|\/#|\/%|\/)/.exec(rest)?.[0] ?? '';
        const arg = envsubst(rest.slice(op.length), lookup);
        out += applyFunction(value, op, arg);
      }
      i = k + 1;
      continue;
    }
    out += c;
    i++;
  }
  return out;
}

/**
 * The lookup Vela's compiler substitutes step fields with (`SubstituteSteps`): a variable of the
 * step's environment, Go-quoted when it has a newline; an unknown variable is left as `${NAME}`.
 *
 * Gotcha: because unknown variables stay, `${HOME}` in a command survives for the shell, but
 * `${NAME:-default}` of an unknown NAME becomes `${NAME}`, not `default`.
 */
export function velaLookup(environment: Readonly<Record<string, string>>): (name: string) => string {
  return (name) => {
    const value = environment[name];
    if (value === undefined) return `\${${name}}`;
    return value.includes('\n') ? goQuote(value) : value;
  };
}
