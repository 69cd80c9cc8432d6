/** The parser of Go's `text/template` subset (text/template/parse): actions, pipelines, control structures. */
import { type Fn, TemplateError, type Value } from './values.ts';

export type Token = { t: 'str' | 'num' | 'bool' | 'nil' | 'var' | 'field' | 'ident' | '(' | ')' | '|' | ':=' | '=' | ','; v: string };

export type Operand =
  | { k: 'lit'; v: Value }
  | { k: 'field'; base: Operand | null; path: string[] }
  | { k: 'var'; name: string; path: string[] }
  | { k: 'pipe'; pipe: Pipeline; path: string[] }
  | { k: 'fn'; name: string };
export type Command = Operand[];
export interface Pipeline {
  decl: string[];
  assign: boolean;
  cmds: Command[];
  line: number;
}
export type Node =
  | { k: 'text'; v: string }
  | { k: 'action'; pipe: Pipeline }
  | { k: 'if' | 'with'; pipe: Pipeline; then: Node[]; else: Node[] }
  | { k: 'range'; pipe: Pipeline; body: Node[]; else: Node[] };

function tokenizeAction(src: string, line: number): Token[] {
  const out: Token[] = [];
  let i = 0;
  while (i < src.length) {
    const c = src[i] ?? '';
    if (/\s/.test(c)) {
      i++;
      continue;
    }
    if (c === '"') {
      let j = i + 1;
      let v = '';
      for (; j < src.length && src[j] !== '"'; j++) {
        if (src[j] === '\\') {
          const n = src[++j] ?? '';
          v += n === 'n' ? '\n' : n === 't' ? '\t' : n;
        } else v += src[j];
      }
      if (j >= src.length) throw new TemplateError('unterminated quoted string', line);
      out.push({ t: 'str', v });
      i = j + 1;
      continue;
    }
    if (c === '`') {
      const j = src.indexOf('`', i + 1);
      if (j < 0) throw new TemplateError('unterminated raw quoted string', line);
      out.push({ t: 'str', v: src.slice(i + 1, j) });
      i = j + 1;
      continue;
    }
    if (src.startsWith(':=', i)) {
      out.push({ t: ':=', v: ':=' });
      i += 2;
      continue;
    }
    if ('()|=,'.includes(c)) {
      out.push({ t: c as Token['t'], v: c });
      i++;
      continue;
    }
    const num = /^-?(?:0x[0-9a-fA-F]+|\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)/.exec(src.slice(i));
    if (num !== null && (c !== '-' || /\d/.test(src[i + 1] ?? ''))) {
      out.push({ t: 'num', v: num[0] });
      i += num[0].length;
      continue;
    }
    const m = /^(\$[A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*|\.[A-Za-z0-9_.]*|[A-Za-z_][A-Za-z0-9_]*)/.exec(src.slice(i));
    if (m === null) throw new TemplateError(`unexpected "${c}" in command`, line);
    const w = m[0];
    if (w.startsWith('$')) out.push({ t: 'var', v: w });
    else if (w.startsWith('.')) out.push({ t: 'field', v: w });
    else if (w === 'true' || w === 'false') out.push({ t: 'bool', v: w });
    else if (w === 'nil') out.push({ t: 'nil', v: w });
    else out.push({ t: 'ident', v: w });
    i += w.length;
  }
  return out;
}

const splitPath = (s: string): string[] => s.split('.').filter((p) => p !== '');

export class Parser {
  private readonly funcs: Record<string, Fn>;
  private tokens: Token[] = [];
  private pos = 0;
  private line = 1;
  constructor(funcs: Record<string, Fn>) {
    this.funcs = funcs;
  }

  parse(source: string): Node[] {
    const items: { kind: 'text' | 'action'; v: string; line: number }[] = [];
    let i = 0;
    let line = 1;
    let trimNext = false;
    while (i < source.length) {
      const open = source.indexOf('{{', i);
      let text = open < 0 ? source.slice(i) : source.slice(i, open);
      if (trimNext) text = text.replace(/^\s+/, '');
      trimNext = false;
      if (open < 0) {
        items.push({ kind: 'text', v: text, line });
        break;
      }
      if (/^-\s/.test(source.slice(open + 2))) text = text.replace(/\s+$/, '');
      items.push({ kind: 'text', v: text, line });
      line += (source.slice(i, open).match(/\n/g) ?? []).length;
      const close = source.indexOf('}}', open + 2);
      if (close < 0) throw new TemplateError('unclosed action', line);
      let inner = source.slice(open + 2, close);
      if (/^-\s/.test(inner)) inner = inner.slice(1);
      if (/\s-$/.test(inner)) {
        inner = inner.slice(0, -1);
        trimNext = true;
      }
      items.push({ kind: 'action', v: inner.trim(), line });
      line += (source.slice(open, close).match(/\n/g) ?? []).length;
      i = close + 2;
    }
    let at = 0;
    const block = (ends: string[]): { nodes: Node[]; end: string } => {
      const nodes: Node[] = [];
      while (at < items.length) {
        const item = items[at++];
        if (item === undefined) break;
        this.line = item.line;
        if (item.kind === 'text') {
          if (item.v !== '') nodes.push({ k: 'text', v: item.v });
          continue;
        }
        const a = item.v;
        if (a.startsWith('/*')) {
          if (!a.endsWith('*/')) throw new TemplateError('unclosed comment', item.line);
          continue;
        }
        const word = /^[a-z]+/.exec(a)?.[0] ?? '';
        if (word === 'end' || word === 'else') {
          if (!ends.includes(word)) throw new TemplateError(`unexpected {{${word}}}`, item.line);
          return { nodes, end: a };
        }
        if (word === 'if' || word === 'with' || word === 'range') {
          nodes.push(control(word, a.slice(word.length), item.line));
          continue;
        }
        if (word === 'define' || word === 'template' || word === 'block') {
          if (word === 'template') {
            const name = /^template\s+"([^"]*)"/.exec(a)?.[1] ?? '';
            throw new TemplateError(`no such template "${name}" (template, define and block are not supported)`, item.line);
          }
          throw new TemplateError(`{{${word}}} is not supported`, item.line);
        }
        nodes.push({ k: 'action', pipe: this.pipeline(a, item.line) });
      }
      if (ends.length > 0) throw new TemplateError('unexpected EOF: missing {{end}}', this.line);
      return { nodes, end: '' };
    };
    // {{if a}}…{{else if b}}…{{else}}…{{end}}: the chained if shares the one {{end}}.
    const control = (word: 'if' | 'with' | 'range', cond: string, line: number): Node => {
      const pipe = this.pipeline(cond, line);
      const body = block(['end', 'else']);
      let elseNodes: Node[] = [];
      if (body.end.startsWith('else')) {
        const rest = body.end.slice(4).trim();
        const chained = /^(if|with)\s/.exec(rest)?.[1] as 'if' | 'with' | undefined;
        elseNodes = chained !== undefined && word !== 'range' ? [control(chained, rest.slice(chained.length), line)] : block(['end']).nodes;
      }
      if (word === 'range') return { k: 'range', pipe, body: body.nodes, else: elseNodes };
      return { k: word, pipe, then: body.nodes, else: elseNodes };
    };
    return block([]).nodes;
  }

  private pipeline(src: string, line: number): Pipeline {
    this.tokens = tokenizeAction(src, line);
    this.pos = 0;
    this.line = line;
    const p = this.pipe();
    if (this.pos < this.tokens.length) throw new TemplateError(`unexpected "${this.tokens[this.pos]?.v ?? ''}" in command`, line);
    return p;
  }

  private pipe(): Pipeline {
    const decl: string[] = [];
    let assign = false;
    const save = this.pos;
    while (this.tokens[this.pos]?.t === 'var') {
      decl.push(this.tokens[this.pos]?.v ?? '');
      this.pos++;
      const t = this.tokens[this.pos]?.t;
      if (t === ',') {
        this.pos++;
        continue;
      }
      if (t === ':=' || t === '=') {
        assign = t === '=';
        this.pos++;
        break;
      }
      decl.length = 0;
      this.pos = save;
      break;
    }
    const cmds: Command[] = [];
    for (;;) {
      const cmd: Command = [];
      while (this.pos < this.tokens.length && this.tokens[this.pos]?.t !== '|' && this.tokens[this.pos]?.t !== ')') cmd.push(this.operand());
      if (cmd.length === 0) throw new TemplateError('missing value for command', this.line);
      cmds.push(cmd);
      if (this.tokens[this.pos]?.t !== '|') break;
      this.pos++;
    }
    return { decl, assign, cmds, line: this.line };
  }

  private operand(): Operand {
    const t = this.tokens[this.pos++];
    if (t === undefined) throw new TemplateError('unexpected end of command', this.line);
    switch (t.t) {
      case 'str':
        return { k: 'lit', v: t.v };
      case 'num':
        return { k: 'lit', v: Number(t.v) };
      case 'bool':
        return { k: 'lit', v: t.v === 'true' };
      case 'nil':
        return { k: 'lit', v: null };
      case 'field':
        return { k: 'field', base: null, path: splitPath(t.v) };
      case 'var': {
        const [name = '$', ...path] = t.v.split('.');
        return { k: 'var', name, path };
      }
      case 'ident':
        if (!(t.v in this.funcs)) throw new TemplateError(`function "${t.v}" not defined`, this.line);
        return { k: 'fn', name: t.v };
      case '(': {
        const pipe = this.pipe();
        if (this.tokens[this.pos]?.t !== ')') throw new TemplateError('unclosed left paren', this.line);
        this.pos++;
        let path: string[] = [];
        const next = this.tokens[this.pos];
        if (next?.t === 'field') {
          path = splitPath(next.v);
          this.pos++;
        }
        return { k: 'pipe', pipe, path };
      }
      default:
        throw new TemplateError(`unexpected "${t.v}" in operand`, this.line);
    }
  }
}
