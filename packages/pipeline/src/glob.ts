/**
 * Go's `path/filepath.Match` (Unix flavour) in TypeScript: the matcher behind Vela's `filepath`
 * rulesets.
 */

/** Thrown by {@link filepathMatch} for a malformed pattern (Go's `filepath.ErrBadPattern`). */
class BadPatternError extends Error {
  override readonly name = 'BadPatternError';
  readonly pattern: string;
  constructor(pattern: string) {
    super(`syntax error in pattern: ${JSON.stringify(pattern)}`);
    this.pattern = pattern;
  }
}

/**
 * Reports whether `name` matches the shell pattern `pattern`, with Go `filepath.Match` semantics:
 * `*` matches any run of non-`/` characters, `?` one non-`/` character, `[abc]`, `[a-z]`, `[^a-z]`
 * a character class, `\` escapes. The whole name must match.
 *
 * Gotcha: `*` never crosses `/` (`src/*` does not match `src/a/b.go`), and there is no `**`.
 * Throws {@link BadPatternError} for a malformed pattern, even when an earlier part already failed
 * to match (as Go >= 1.16 does).
 */
export function filepathMatch(pattern: string, name: string): boolean {
  // Work on code points so that `?` matches one character, as Go matches one rune.
  let pat = Array.from(pattern);
  let str = Array.from(name);
  pattern: while (pat.length > 0) {
    const { star, chunk, rest } = scanChunk(pat);
    pat = rest;
    if (star && chunk.length === 0) {
      // Trailing * matches the rest unless it has a '/'.
      return !str.includes('/');
    }
    // Look for a match at the current position.
    const t = matchChunk(chunk, str, pattern);
    if (t !== null && (t.length === 0 || pat.length > 0)) {
      str = t;
      continue;
    }
    if (star) {
      // Look for a match skipping i+1 characters; cannot skip '/'.
      for (let i = 0; i < str.length && str[i] !== '/'; i++) {
        const t2 = matchChunk(chunk, str.slice(i + 1), pattern);
        if (t2 !== null) {
          if (pat.length === 0 && t2.length > 0) continue;
          str = t2;
          continue pattern;
        }
      }
    }
    // No match: check the rest of the pattern is well-formed before answering.
    while (pat.length > 0) {
      const next = scanChunk(pat);
      pat = next.rest;
      matchChunk(next.chunk, [], pattern);
    }
    return false;
  }
  return str.length === 0;
}

function scanChunk(pat: string[]): { star: boolean; chunk: string[]; rest: string[] } {
  let star = false;
  let i = 0;
  while (i < pat.length && pat[i] === '*') {
    i++;
    star = true;
  }
  pat = pat.slice(i);
  let inRange = false;
  let j = 0;
  scan: for (; j < pat.length; j++) {
    switch (pat[j]) {
      case '\\':
        if (j + 1 < pat.length) j++;
        break;
      case '[':
        inRange = true;
        break;
      case ']':
        inRange = false;
        break;
      case '*':
        if (!inRange) break scan;
        break;
    }
  }
  return { star, chunk: pat.slice(0, j), rest: pat.slice(j) };
}

/**
 * Matches `chunk` at the start of `s`; returns the rest of `s`, or null when it does not match.
 * Throws for a malformed chunk (checked even while `s` is exhausted, as Go does).
 */
function matchChunk(chunkIn: string[], sIn: string[], pattern: string): string[] | null {
  let chunk = chunkIn;
  let s = sIn;
  let failed = false;
  while (chunk.length > 0) {
    if (!failed && s.length === 0) failed = true;
    const c = chunk[0];
    if (c === '[') {
      let r = '';
      if (!failed) {
        r = s[0] ?? '';
        s = s.slice(1);
      }
      chunk = chunk.slice(1);
      let negated = false;
      if (chunk.length > 0 && chunk[0] === '^') {
        negated = true;
        chunk = chunk.slice(1);
      }
      let match = false;
      let nrange = 0;
      for (;;) {
        if (chunk.length > 0 && chunk[0] === ']' && nrange > 0) {
          chunk = chunk.slice(1);
          break;
        }
        const lo = getEsc(chunk, pattern);
        chunk = lo.rest;
        let hi = lo.ch;
        if (chunk[0] === '-') {
          const h = getEsc(chunk.slice(1), pattern);
          hi = h.ch;
          chunk = h.rest;
        }
        const rc = r.codePointAt(0) ?? -1;
        if ((lo.ch.codePointAt(0) ?? 0) <= rc && rc <= (hi.codePointAt(0) ?? 0)) match = true;
        nrange++;
      }
      if (match === negated) failed = true;
    } else if (c === '?') {
      if (!failed) {
        if (s[0] === '/') failed = true;
        s = s.slice(1);
      }
      chunk = chunk.slice(1);
    } else if (c === '\\') {
      chunk = chunk.slice(1);
      if (chunk.length === 0) throw new BadPatternError(pattern);
      if (!failed) {
        if (chunk[0] !== s[0]) failed = true;
        s = s.slice(1);
      }
      chunk = chunk.slice(1);
    } else {
      if (!failed) {
        if (c !== s[0]) failed = true;
        s = s.slice(1);
      }
      chunk = chunk.slice(1);
    }
  }
  return failed ? null : s;
}

function getEsc(chunk: string[], pattern: string): { ch: string; rest: string[] } {
  if (chunk.length === 0 || chunk[0] === '-' || chunk[0] === ']') throw new BadPatternError(pattern);
  let i = 0;
  if (chunk[0] === '\\') {
    i = 1;
    if (chunk.length === 1) throw new BadPatternError(pattern);
  }
  const ch = chunk[i] ?? '';
  const rest = chunk.slice(i + 1);
  if (rest.length === 0) throw new BadPatternError(pattern);
  return { ch, rest };
}
