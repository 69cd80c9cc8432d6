/**
 * Secret masking on a byte stream: every occurrence of a secret value — in each of the forms a
 * step can print it ({@link secretForms}) — becomes `***`, also when it is split across chunks or
 * spans lines.
 */

/** What a secret value is replaced with. */
const MASK = '***';
const MASK_BYTES = Buffer.from(MASK, 'latin1');
const EMPTY = Buffer.alloc(0);

function toBuffer(chunk: Uint8Array): Buffer {
  return Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
}

/**
 * Lines of a multi-line secret shorter than this (in characters) are not masked on their own:
 * a line such as `}` or `--` would mask half the log. They are still masked as part of the whole
 * value in every form.
 */
export const MIN_LINE_LENGTH = 4;

/**
 * Every form in which a step may print the secret `value`, each to be masked on its own:
 * - the raw value, and the value without its trailing newlines;
 * - newline → space, trailing space trimmed: the form `echo $SECRET` prints, which go-vela/worker
 *   masks (`executor/linux/step.go`, getSecretValues);
 * - the value with LF and with CRLF line ends;
 * - the JSON-escaped form (`\n` as two characters, `\"`, `\\`), as a JSON log line carries it;
 * - every line of a multi-line value on its own, as GitHub Actions masks them (`printf '%s' "$CERT"
 *   | tr '\n' ,`), except lines shorter than {@link MIN_LINE_LENGTH} characters.
 *
 * Empty forms are left out; `[]` for an empty value.
 */
export function secretForms(value: string): string[] {
  const forms = new Set<string>();
  if (value === '') return [];
  const trimmed = value.replace(/(?:\r?\n)+$/, '');
  for (const base of [value, trimmed]) {
    const lf = base.replace(/\r\n/g, '\n');
    for (const form of [base, lf, lf.replace(/\n/g, '\r\n')]) {
      forms.add(form);
      forms.add(JSON.stringify(form).slice(1, -1));
    }
    // go-vela/worker getSecretValues: strings.ReplaceAll(s, "\n", " "), then TrimSuffix(" ").
    const spaced = lf.replace(/\n/g, ' ');
    forms.add(spaced.endsWith(' ') ? spaced.slice(0, -1) : spaced);
  }
  if (/[\r\n]/.test(trimmed)) {
    for (const line of trimmed.split(/\r?\n/)) if (line.length >= MIN_LINE_LENGTH) forms.add(line);
  }
  forms.delete('');
  return [...forms];
}

/** Every form of every secret value: unique, non-empty. */
function allForms(secrets: Iterable<string>): Set<string> {
  const forms = new Set<string>();
  for (const secret of secrets) for (const form of secretForms(secret)) forms.add(form);
  return forms;
}

/** Strings as UTF-8 bytes, longest first. */
function prepare(forms: Iterable<string>): Buffer[] {
  return [...forms].map((s) => Buffer.from(s, 'utf8')).sort((a, b) => b.length - a.length);
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/**
 * Masks every form ({@link secretForms}) of the secrets in `text` at once: the reference the
 * streaming {@link SecretMasker} matches byte for byte.
 *
 * Matching is leftmost-longest and does not overlap, as a regular expression alternation of the
 * secrets sorted longest first: of two secrets where one is a prefix of the other, the longer one
 * is masked whole; of two overlapping occurrences, the one that starts first wins.
 */
export function maskText(text: string, secrets: Iterable<string>): string {
  const values = [...allForms(secrets)].sort((a, b) => Buffer.byteLength(b) - Buffer.byteLength(a));
  if (values.length === 0) return text;
  return text.replace(new RegExp(values.map(escapeRegExp).join('|'), 'g'), MASK);
}

/**
 * Masks secret values in a stream of bytes cut anywhere (mid-line, mid-character, mid-secret).
 *
 * Every form of each secret ({@link secretForms}) is masked. `write` returns the bytes that are
 * safe to pass on and holds back at most `maxSecretLength - 1` bytes (the longest form's length
 * minus one) that may be the start of a form; `end` returns the rest. Working on bytes keeps
 * multi-byte UTF-8 characters whole: a secret's bytes only ever match on character boundaries of
 * valid UTF-8, and bytes held back are passed on unchanged later. The output equals
 * {@link maskText} of the whole input.
 *
 * Gotcha: `add` takes effect for bytes not passed on yet; bytes already returned are not revisited.
 */
export class SecretMasker {
  readonly #values = new Set<string>();
  #forms = new Set<string>();
  #secrets: Buffer[];
  #max = 0;
  #firstBytes = new Uint8Array(256);
  #carry: Buffer = EMPTY;
  #pattern: RegExp | undefined;

  constructor(secrets: Iterable<string> = []) {
    this.#secrets = [];
    this.add(...secrets);
  }

  /** The longest form of a secret, in bytes (0 with no secrets). */
  get maxSecretLength(): number {
    return this.#max;
  }

  /** Bytes currently held back. */
  get pending(): number {
    return this.#carry.length;
  }

  /** Masks these values (in every form) too from now on. Empty and known values are ignored. */
  add(...secrets: string[]): void {
    const fresh = secrets.filter((s) => s !== '' && !this.#values.has(s));
    if (fresh.length === 0) return;
    for (const s of fresh) {
      this.#values.add(s);
      for (const form of secretForms(s)) this.#forms.add(form);
    }
    const next = prepare(this.#forms);
    this.#secrets = next;
    this.#max = next[0]?.length ?? 0;
    this.#firstBytes = new Uint8Array(256);
    for (const s of next) this.#firstBytes[s[0] ?? 0] = 1;
    this.#pattern = next.length === 0 ? undefined : new RegExp(next.map((b) => escapeRegExp(b.toString('latin1'))).join('|'), 'g');
  }

  /** Masks the next chunk: returns what can be passed on now (possibly empty). */
  write(chunk: Uint8Array): Buffer {
    if (this.#pattern === undefined) return toBuffer(chunk);
    const data = this.#carry.length === 0 ? toBuffer(chunk) : Buffer.concat([this.#carry, chunk]);
    return this.#process(data, false);
  }

  /** The end of the stream: returns every byte still held back, masked. */
  end(): Buffer {
    const data = this.#carry;
    this.#carry = EMPTY;
    if (data.length === 0 || this.#pattern === undefined) return data;
    return this.#process(data, true);
  }

  #process(data: Buffer, final: boolean): Buffer {
    const n = data.length;
    const partials = final ? [] : this.#partialStarts(data);
    let partialIndex = 0;
    // One byte per character: the regular expression matches bytes. Its alternation is sorted
    // longest first, so each match is the leftmost-longest one, as in maskText.
    const text = data.toString('latin1');
    const re = this.#pattern as RegExp;
    re.lastIndex = 0;
    const parts: Buffer[] = [];
    let pos = 0;
    for (;;) {
      while (partialIndex < partials.length && (partials[partialIndex] ?? n) < pos) partialIndex++;
      const holdFrom = partials[partialIndex] ?? n;
      re.lastIndex = pos;
      const match = re.exec(text);
      if (match === null || match.index >= holdFrom) {
        if (holdFrom > pos) parts.push(data.subarray(pos, holdFrom));
        // Copy the carry: `data` may be the caller's buffer, reused after we return.
        this.#carry = holdFrom < n ? Buffer.from(data.subarray(holdFrom)) : EMPTY;
        break;
      }
      if (match.index > pos) parts.push(data.subarray(pos, match.index));
      parts.push(MASK_BYTES);
      pos = match.index + match[0].length;
    }
    if (parts.length === 1) return parts[0] as Buffer;
    return parts.length === 0 ? EMPTY : Buffer.concat(parts);
  }

  /**
   * Positions near the end where the rest of `data` is a proper prefix of a secret: a secret may
   * start there and continue in the next chunk. Ascending.
   */
  #partialStarts(data: Buffer): number[] {
    const n = data.length;
    const out: number[] = [];
    const from = Math.max(0, n - this.#max + 1);
    for (let t = from; t < n; t++) {
      if (this.#firstBytes[data[t] as number] !== 1) continue;
      const rest = n - t;
      for (const secret of this.#secrets) {
        if (secret.length <= rest) break; // sorted longest first: the rest are no longer
        if (data.compare(secret, 0, rest, t, n) === 0) {
          out.push(t);
          break;
        }
      }
    }
    return out;
  }
}
