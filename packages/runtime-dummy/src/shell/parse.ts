/**
 * The parser of the dummy's tiny POSIX shell: enough of `sh` for build scripts in tests
 * (lists, `&&`/`||`, pipelines, `!`, `if`/`for`/`while`/`until`, `{ }`/`( )`, redirections,
 * here-documents, quoting, `$VAR`/`${VAR}`/`$?`/`$$`/`$(( ))`). No globbing, functions or `case`.
 */

/** One piece of a word, before expansion. */
export type WordPart =
  | { type: 'lit'; text: string; quoted: boolean }
  | { type: 'var'; name: string; quoted: boolean; fallback?: { op: string; word: WordPart[] } }
  | { type: 'arith'; expr: string; quoted: boolean }
  | { type: 'cmd'; script: string; quoted: boolean };

/** A shell word: its parts, and whether it held any quoting (an empty quoted word still counts). */
export interface Word {
  parts: WordPart[];
  quoted: boolean;
}

/** A redirection of one file descriptor. */
export interface Redirect {
  fd: number;
  op: '>' | '>>' | '<' | '>&' | '<&' | '<<';
  target?: Word;
  heredoc?: { body: string; expand: boolean };
}

/** `NAME=value` before a command. */
interface Assignment {
  name: string;
  value: Word;
}

/** A command of a pipeline. */
export type Command =
  | { type: 'simple'; assigns: Assignment[]; words: Word[]; redirects: Redirect[] }
  | { type: 'if'; clauses: { cond: List; body: List }[]; otherwise?: List; redirects: Redirect[] }
  | { type: 'for'; name: string; items?: Word[]; body: List; redirects: Redirect[] }
  | { type: 'loop'; until: boolean; cond: List; body: List; redirects: Redirect[] }
  | { type: 'group'; subshell: boolean; body: List; redirects: Redirect[] };

/** Commands joined by `|`, optionally negated with `!`. */
export interface Pipeline {
  negate: boolean;
  commands: Command[];
}

/** Pipelines joined by `&&` and `||`. */
export interface AndOr {
  first: Pipeline;
  rest: { op: '&&' | '||'; pipeline: Pipeline }[];
}

/** A sequence of and-or lists. */
export type List = AndOr[];

/** A syntax error, worded like a shell's. */
export class ShellSyntaxError extends Error {
  override readonly name = 'ShellSyntaxError';
}

type Token =
  | { kind: 'word'; word: Word; plain: string | undefined }
  | { kind: 'op'; op: string }
  | { kind: 'redir'; fd: number | undefined; op: string; heredoc?: { delimiter: string; strip: boolean; expand: boolean; body: string } }
  | { kind: 'eof' };

const OPERATORS = ['&&', '||', ';;', ';', '|', '&', '(', ')'];

function tokenize(source: string): Token[] {
  const tokens: Token[] = [];
  const pendingHeredocs: NonNullable<Extract<Token, { kind: 'redir' }>['heredoc']>[] = [];
  let i = 0;
  let expectDelimiter: Extract<Token, { kind: 'redir' }> | undefined;

  const readHeredocBodies = (): void => {
    for (const heredoc of pendingHeredocs.splice(0)) {
      const lines: string[] = [];
      for (;;) {
        if (i >= source.length) break;
        let end = source.indexOf('\n', i);
        if (end < 0) end = source.length;
        let line = source.slice(i, end);
        i = end + 1;
        if (heredoc.strip) line = line.replace(/^\t+/, '');
        if (line === heredoc.delimiter) break;
        lines.push(line);
      }
      heredoc.body = lines.length > 0 ? `${lines.join('\n')}\n` : '';
    }
  };

  while (i < source.length) {
    const c = source[i] as string;
    if (c === ' ' || c === '\t' || c === '\r') {
      i++;
      continue;
    }
    if (c === '\\' && source[i + 1] === '\n') {
      i += 2;
      continue;
    }
    if (c === '#') {
      while (i < source.length && source[i] !== '\n') i++;
      continue;
    }
    if (c === '\n') {
      tokens.push({ kind: 'op', op: '\n' });
      i++;
      readHeredocBodies();
      continue;
    }
    const op = OPERATORS.find((candidate) => source.startsWith(candidate, i));
    if (op) {
      tokens.push({ kind: 'op', op });
      i += op.length;
      continue;
    }
    // Redirections, with an optional fd number right before them.
    const redirect = /^(\d*)(<<-|<<|>>|>&|<&|>\||<|>)/.exec(source.slice(i, i + 8));
    if (redirect) {
      const [all, fd, rop] = redirect as unknown as [string, string, string];
      const token: Extract<Token, { kind: 'redir' }> = { kind: 'redir', fd: fd === '' ? undefined : Number(fd), op: rop === '>|' ? '>' : rop };
      tokens.push(token);
      i += all.length;
      if (rop === '<<' || rop === '<<-') expectDelimiter = token;
      continue;
    }
    const [word, plain, next] = readWord(source, i);
    i = next;
    if (expectDelimiter) {
      const delimiter = word.parts.map((p) => (p.type === 'lit' ? p.text : '')).join('');
      const heredoc = { delimiter, strip: expectDelimiter.op === '<<-', expand: !word.quoted, body: '' };
      expectDelimiter.heredoc = heredoc;
      pendingHeredocs.push(heredoc);
      expectDelimiter = undefined;
      continue;
    }
    tokens.push({ kind: 'word', word, plain });
  }
  readHeredocBodies();
  tokens.push({ kind: 'eof' });
  return tokens;
}

const WORD_END = new Set([' ', '\t', '\r', '\n', ';', '&', '|', '(', ')', '<', '>']);

/** Reads one word from `i`; returns it, its text when entirely unquoted literal, and the next index. */
function readWord(source: string, start: number): [Word, string | undefined, number] {
  const parts: WordPart[] = [];
  let quoted = false;
  let i = start;
  let lit = '';
  const flush = (isQuoted: boolean): void => {
    if (lit !== '') parts.push({ type: 'lit', text: lit, quoted: isQuoted });
    lit = '';
  };
  while (i < source.length) {
    const c = source[i] as string;
    if (WORD_END.has(c)) break;
    if (c === '\\') {
      if (source[i + 1] === '\n') {
        i += 2;
        continue;
      }
      flush(false);
      parts.push({ type: 'lit', text: source[i + 1] ?? '', quoted: true });
      quoted = true;
      i += 2;
      continue;
    }
    if (c === "'") {
      flush(false);
      const end = source.indexOf("'", i + 1);
      if (end < 0) throw new ShellSyntaxError('syntax error: unterminated quoted string');
      parts.push({ type: 'lit', text: source.slice(i + 1, end), quoted: true });
      quoted = true;
      i = end + 1;
      continue;
    }
    if (c === '"') {
      flush(false);
      quoted = true;
      i++;
      let inner = '';
      const flushInner = (): void => {
        if (inner !== '') parts.push({ type: 'lit', text: inner, quoted: true });
        inner = '';
      };
      parts.push({ type: 'lit', text: '', quoted: true });
      for (;;) {
        if (i >= source.length) throw new ShellSyntaxError('syntax error: unterminated quoted string');
        const d = source[i] as string;
        if (d === '"') {
          i++;
          break;
        }
        if (d === '\\' && ['$', '`', '"', '\\', '\n'].includes(source[i + 1] ?? '')) {
          if (source[i + 1] !== '\n') inner += source[i + 1];
          i += 2;
          continue;
        }
        if (d === '$') {
          const expansion = readDollar(source, i, true);
          if (expansion) {
            flushInner();
            parts.push(expansion[0]);
            i = expansion[1];
            continue;
          }
        }
        inner += d;
        i++;
      }
      flushInner();
      continue;
    }
    if (c === '$') {
      const expansion = readDollar(source, i, false);
      if (expansion) {
        flush(false);
        parts.push(expansion[0]);
        i = expansion[1];
        continue;
      }
    }
    lit += c;
    i++;
  }
  flush(false);
  const plain = parts.every((p) => p.type === 'lit' && !p.quoted) && !quoted ? parts.map((p) => (p as { text: string }).text).join('') : undefined;
  return [{ parts, quoted }, plain, i];
}

/** Reads a `$` expansion at `i`, or returns undefined when the `$` is literal. */
function readDollar(source: string, i: number, quoted: boolean): [WordPart, number] | undefined {
  const next = source[i + 1] ?? '';
  if (source.startsWith('$((', i)) {
    const end = source.indexOf('))', i + 3);
    if (end < 0) throw new ShellSyntaxError('syntax error: missing ))');
    return [{ type: 'arith', expr: source.slice(i + 3, end), quoted }, end + 2];
  }
  if (next === '(') {
    let depth = 1;
    let j = i + 2;
    while (j < source.length && depth > 0) {
      if (source[j] === '(') depth++;
      else if (source[j] === ')') depth--;
      j++;
    }
    if (depth > 0) throw new ShellSyntaxError('syntax error: missing )');
    return [{ type: 'cmd', script: source.slice(i + 2, j - 1), quoted }, j];
  }
  if (next === '{') {
    const end = source.indexOf('}', i + 2);
    if (end < 0) throw new ShellSyntaxError('syntax error: bad substitution');
    const body = source.slice(i + 2, end);
    const match = /^([A-Za-z_][A-Za-z0-9_]*|[0-9]+|[?$#@*!-])(?:(:?[-=+?])(.*))?$/s.exec(body);
    if (!match) throw new ShellSyntaxError(`syntax error: bad substitution: \${${body}}`);
    const [, name, op, rest] = match as unknown as [string, string, string | undefined, string | undefined];
    const part: WordPart = { type: 'var', name, quoted };
    if (op !== undefined) part.fallback = { op, word: readWord(`${rest ?? ''}`, 0)[0].parts };
    return [part, end + 1];
  }
  const simple = /^([A-Za-z_][A-Za-z0-9_]*|[0-9?$#@*!-])/.exec(source.slice(i + 1, i + 200));
  if (simple?.[1]) return [{ type: 'var', name: simple[1], quoted }, i + 1 + simple[1].length];
  return undefined;
}

const RESERVED_END = new Set(['then', 'elif', 'else', 'fi', 'do', 'done', '}']);

/** Parses a script into a {@link List}; throws {@link ShellSyntaxError}. */
export function parseScript(source: string): List {
  const tokens = tokenize(source);
  let pos = 0;
  const peek = (): Token => tokens[pos] as Token;
  const isOp = (op: string): boolean => {
    const t = peek();
    return t.kind === 'op' && t.op === op;
  };
  const isReserved = (word: string): boolean => {
    const t = peek();
    return t.kind === 'word' && t.plain === word;
  };
  const expectReserved = (word: string): void => {
    if (!isReserved(word)) throw new ShellSyntaxError(`syntax error: expected "${word}"${describe(peek())}`);
    pos++;
  };
  const skipNewlines = (): void => {
    while (isOp('\n')) pos++;
  };
  const describe = (t: Token): string =>
    t.kind === 'eof'
      ? ' but the script ended'
      : t.kind === 'word'
        ? ` near "${t.plain ?? '…'}"`
        : t.kind === 'op'
          ? ` near "${t.op === '\n' ? '\\n' : t.op}"`
          : ` near "${t.op}"`;

  const atListEnd = (): boolean => {
    const t = peek();
    if (t.kind === 'eof') return true;
    if (t.kind === 'op' && t.op === ')') return true;
    return t.kind === 'word' && t.plain !== undefined && RESERVED_END.has(t.plain);
  };

  const parseList = (): List => {
    const list: List = [];
    for (;;) {
      while (isOp('\n') || isOp(';')) pos++;
      if (atListEnd()) return list;
      list.push(parseAndOr());
      if (isOp(';') || isOp('\n') || isOp('&')) {
        pos++;
        continue;
      }
      if (atListEnd()) return list;
      throw new ShellSyntaxError(`syntax error: unexpected token${describe(peek())}`);
    }
  };

  const parseAndOr = (): AndOr => {
    const first = parsePipeline();
    const rest: AndOr['rest'] = [];
    while (isOp('&&') || isOp('||')) {
      const op = (peek() as { op: '&&' | '||' }).op;
      pos++;
      skipNewlines();
      rest.push({ op, pipeline: parsePipeline() });
    }
    return { first, rest };
  };

  const parsePipeline = (): Pipeline => {
    let negate = false;
    if (isReserved('!')) {
      negate = true;
      pos++;
    }
    const commands = [parseCommand()];
    while (isOp('|')) {
      pos++;
      skipNewlines();
      commands.push(parseCommand());
    }
    return { negate, commands };
  };

  const parseRedirect = (): Redirect => {
    const t = peek() as Extract<Token, { kind: 'redir' }>;
    pos++;
    const op = (t.op === '<<-' ? '<<' : t.op) as Redirect['op'];
    const fd = t.fd ?? (op.startsWith('<') ? 0 : 1);
    if (op === '<<') return { fd, op, heredoc: { body: t.heredoc?.body ?? '', expand: t.heredoc?.expand ?? true } };
    const target = peek();
    if (target.kind !== 'word') throw new ShellSyntaxError(`syntax error: a redirection needs a target${describe(target)}`);
    pos++;
    return { fd, op, target: target.word };
  };

  const trailingRedirects = (): Redirect[] => {
    const redirects: Redirect[] = [];
    while (peek().kind === 'redir') redirects.push(parseRedirect());
    return redirects;
  };

  const parseCommand = (): Command => {
    const t = peek();
    if (t.kind === 'op' && t.op === '(') {
      pos++;
      const body = parseList();
      if (!isOp(')')) throw new ShellSyntaxError(`syntax error: expected ")"${describe(peek())}`);
      pos++;
      return { type: 'group', subshell: true, body, redirects: trailingRedirects() };
    }
    if (t.kind === 'word' && t.plain !== undefined) {
      switch (t.plain) {
        case '{': {
          pos++;
          const body = parseList();
          expectReserved('}');
          return { type: 'group', subshell: false, body, redirects: trailingRedirects() };
        }
        case 'if': {
          pos++;
          const clauses: { cond: List; body: List }[] = [];
          let otherwise: List | undefined;
          const cond = parseList();
          expectReserved('then');
          clauses.push({ cond, body: parseList() });
          for (;;) {
            if (isReserved('elif')) {
              pos++;
              const elifCond = parseList();
              expectReserved('then');
              clauses.push({ cond: elifCond, body: parseList() });
              continue;
            }
            if (isReserved('else')) {
              pos++;
              otherwise = parseList();
            }
            expectReserved('fi');
            break;
          }
          return otherwise ? { type: 'if', clauses, otherwise, redirects: trailingRedirects() } : { type: 'if', clauses, redirects: trailingRedirects() };
        }
        case 'for': {
          pos++;
          const nameToken = peek();
          if (nameToken.kind !== 'word' || nameToken.plain === undefined) throw new ShellSyntaxError('syntax error: bad for loop variable');
          pos++;
          let items: Word[] | undefined;
          skipNewlines();
          if (isReserved('in')) {
            pos++;
            items = [];
            while (peek().kind === 'word') items.push((tokens[pos++] as Extract<Token, { kind: 'word' }>).word);
          }
          while (isOp(';') || isOp('\n')) pos++;
          expectReserved('do');
          const body = parseList();
          expectReserved('done');
          const node: Command = { type: 'for', name: nameToken.plain, body, redirects: trailingRedirects() };
          if (items) node.items = items;
          return node;
        }
        case 'while':
        case 'until': {
          pos++;
          const cond = parseList();
          expectReserved('do');
          const body = parseList();
          expectReserved('done');
          return { type: 'loop', until: t.plain === 'until', cond, body, redirects: trailingRedirects() };
        }
      }
    }
    return parseSimple();
  };

  const parseSimple = (): Command => {
    const assigns: Assignment[] = [];
    const words: Word[] = [];
    const redirects: Redirect[] = [];
    for (;;) {
      const t = peek();
      if (t.kind === 'redir') {
        redirects.push(parseRedirect());
        continue;
      }
      if (t.kind !== 'word') break;
      if (words.length > 0 || !tryAssignment(t.word, assigns)) words.push(t.word);
      pos++;
    }
    if (words.length === 0 && assigns.length === 0 && redirects.length === 0) {
      throw new ShellSyntaxError(`syntax error: unexpected token${describe(peek())}`);
    }
    return { type: 'simple', assigns, words, redirects };
  };

  const list = parseList();
  if (peek().kind !== 'eof') throw new ShellSyntaxError(`syntax error: unexpected token${describe(peek())}`);
  return list;
}

/** When `word` is `NAME=value` (NAME unquoted), records it and returns true. */
function tryAssignment(word: Word, assigns: Assignment[]): boolean {
  const first = word.parts[0];
  if (first?.type !== 'lit' || first.quoted) return false;
  const match = /^([A-Za-z_][A-Za-z0-9_]*)=/.exec(first.text);
  if (!match?.[1]) return false;
  const rest = first.text.slice(match[0].length);
  const parts: WordPart[] = [...(rest === '' ? [] : [{ type: 'lit' as const, text: rest, quoted: false }]), ...word.parts.slice(1)];
  assigns.push({ name: match[1], value: { parts, quoted: true } });
  return true;
}
