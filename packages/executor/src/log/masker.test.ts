import { describe, expect, it } from 'vitest';
import { int, pick, prng } from '../../test/prng.ts';
import { maskText, MIN_LINE_LENGTH, SecretMasker, secretForms } from './masker.ts';

function maskInChunks(text: string, secrets: string[], cuts: number[]): string {
  const bytes = Buffer.from(text, 'utf8');
  const masker = new SecretMasker(secrets);
  const out: Buffer[] = [];
  let pos = 0;
  for (const cut of cuts) {
    const next = Math.min(bytes.length, pos + cut);
    out.push(Buffer.from(masker.write(bytes.subarray(pos, next))));
    // The masker never holds back a whole secret (a plain check: expect() per chunk is slow in the fuzz).
    if (masker.pending >= Math.max(1, masker.maxSecretLength))
      throw new Error(`held back ${masker.pending} bytes, the longest form has ${masker.maxSecretLength}`);
    pos = next;
  }
  out.push(Buffer.from(masker.write(bytes.subarray(pos))));
  out.push(masker.end());
  return Buffer.concat(out).toString('utf8');
}

describe('maskText (the reference)', () => {
  it('replaces every occurrence', () => {
    expect(maskText('token=abc123 again abc123', ['abc123'])).toBe('token=*** again ***');
  });
  it('prefers the longer of two secrets where one is a prefix of the other', () => {
    expect(maskText('pass passw0rd', ['pass', 'passw0rd'])).toBe('*** ***');
  });
  it('escapes regular expression characters', () => {
    expect(maskText('a.b a+b (x)', ['a.b', '(x)'])).toBe('*** a+b ***');
  });
  it('ignores empty secrets', () => {
    expect(maskText('abc', ['', 'b'])).toBe('a***c');
  });
});

describe('SecretMasker', () => {
  it('masks a secret split across chunks', () => {
    expect(maskInChunks('hello s3cr3t world', ['s3cr3t'], [8, 1, 1])).toBe('hello *** world');
  });

  it('masks a multi-line secret spanning chunks and lines', () => {
    const key = '-----BEGIN KEY-----\nMIIB\nabc\n-----END KEY-----';
    expect(maskInChunks(`key:\n${key}\ndone\n`, [key], [3, 10, 10, 5, 7])).toBe('key:\n***\ndone\n');
  });

  it('keeps multi-byte characters whole when chunks cut them', () => {
    const text = 'é€𝄞 secret: ünïcödé𝄞 end €';
    for (let cut = 1; cut < 6; cut++) {
      expect(
        maskInChunks(
          text,
          ['ünïcödé𝄞'],
          Array.from({ length: 40 }, () => cut),
        ),
      ).toBe('é€𝄞 secret: *** end €');
    }
  });

  it('passes bytes through unchanged without secrets', () => {
    const masker = new SecretMasker([]);
    const chunk = Buffer.from('abc');
    expect(masker.write(chunk)).toBe(chunk);
    expect(masker.end().length).toBe(0);
  });

  it('holds back at most maxSecretLength - 1 bytes', () => {
    const masker = new SecretMasker(['abcdef']);
    expect(masker.write(Buffer.from('xxabcde')).toString()).toBe('xx');
    expect(masker.pending).toBe(5);
    expect(masker.write(Buffer.from('Z')).toString()).toBe('abcdeZ');
    expect(masker.end().toString()).toBe('');
  });

  it('masks values added later in bytes not yet passed on', () => {
    // `tok` is held back as a possible start of `tokXYZ123`, so `token` added now still masks it.
    const masker = new SecretMasker(['tokXYZ123']);
    const first = masker.write(Buffer.from('a tok'));
    expect(first.toString()).toBe('a ');
    masker.add('token');
    const rest = Buffer.concat([masker.write(Buffer.from('en b')), masker.end()]);
    expect(Buffer.concat([first, rest]).toString()).toBe('a *** b');
  });

  it('fuzz: 4 000 random logs cut at random byte boundaries match the reference, with no leaks', () => {
    const rand = prng(0xbe27);
    const alphabet = ['a', 'b', 'c', 'ab', '\n', ' ', 'é', '€', '𝄞', 'x\n'];
    const word = (min: number, max: number) => Array.from({ length: int(rand, min, max) }, () => pick(rand, alphabet)).join('');
    let leaks = 0;
    let mismatches = 0;
    let masked = 0;
    // 4 000 cases: every secret now brings its forms (secretForms), which triples the work per case.
    for (let n = 0; n < 4_000; n++) {
      const secrets: string[] = [];
      const count = int(rand, 1, 4);
      for (let i = 0; i < count; i++) {
        const kind = rand();
        const base = secrets.length > 0 ? pick(rand, secrets) : word(1, 6);
        if (kind < 0.25 && secrets.length > 0)
          secrets.push(base + word(1, 3)); // a prefix of another
        else if (kind < 0.4 && secrets.length > 0)
          secrets.push(base.slice(Math.floor(base.length / 2)) + word(1, 3)); // overlapping
        else if (kind < 0.5)
          secrets.push(`${word(1, 3)}\n${word(1, 3)}`); // multi-line
        else secrets.push(word(1, 8));
      }
      let text = '';
      const parts = int(rand, 0, 12);
      for (let i = 0; i < parts; i++) text += rand() < 0.5 ? pick(rand, secrets) : word(0, 8);
      const bytes = Buffer.byteLength(text);
      const cuts: number[] = [];
      for (let used = 0; used < bytes;) {
        const cut = rand() < 0.8 ? int(rand, 1, 4) : int(rand, 5, 64);
        cuts.push(cut);
        used += cut;
      }
      const expected = maskText(text, secrets);
      const actual = maskInChunks(text, secrets, cuts);
      if (actual !== expected) {
        mismatches++;
        if (mismatches === 1) expect({ n, text, secrets, cuts, actual }).toEqual({ n, text, secrets, cuts, actual: expected });
      }
      if (secrets.some((s) => actual.includes(s))) leaks++;
      if (actual !== text) masked++;
    }
    expect(mismatches).toBe(0);
    expect(leaks).toBe(0);
    // The cases did exercise masking.
    expect(masked).toBeGreaterThan(2000);
  });
});

describe('forms of a secret (issue #13 item 1)', () => {
  // A certificate-like value with a trailing newline, as a secret read from a file has.
  const CERT = 'line-one\nline-two\n';

  it('lists the raw, trimmed, newline-to-space (go-vela getSecretValues), CRLF, JSON-escaped forms and every line', () => {
    const forms = secretForms(CERT);
    for (const form of [
      'line-one\nline-two\n', // raw
      'line-one\nline-two', // trailing newline trimmed
      'line-one line-two', // go-vela/worker executor/linux/step.go getSecretValues
      'line-one\r\nline-two\r\n', // CRLF
      'line-one\r\nline-two',
      'line-one\\nline-two\\n', // JSON-escaped: `\n` as two characters
      'line-one\\nline-two',
      'line-one\\r\\nline-two',
      'line-one', // each line on its own
      'line-two',
    ]) {
      expect(forms).toContain(form);
    }
    expect(forms).not.toContain('');
  });

  it('does not mask lines shorter than MIN_LINE_LENGTH on their own, only as part of the value', () => {
    expect(MIN_LINE_LENGTH).toBe(4);
    const forms = secretForms('-----BEGIN-----\n}\nabc\nabcd\n');
    expect(forms).not.toContain('}');
    expect(forms).not.toContain('abc');
    expect(forms).toContain('abcd');
    expect(maskText('a } abc here', ['-----BEGIN-----\n}\nabc\nabcd\n'])).toBe('a } abc here');
  });

  it('masks what the steps of the issue print: echo unquoted, tr to commas, CRLF, JSON', () => {
    const log = [
      'unquoted=line-one line-two', // echo unquoted=$CERT
      'line-one,line-two', // printf '%s' "$CERT" | tr '\n' ,
      'crlf=line-one\r\nline-two\r\n',
      '{"cert":"line-one\\nline-two\\n"}',
      'raw=line-one\nline-two\n',
      '',
    ].join('\n');
    const masked = maskText(log, [CERT]);
    expect(masked).toBe(['unquoted=***', '***,***', 'crlf=***', '{"cert":"***"}', 'raw=***', ''].join('\n'));
    expect(masked).not.toMatch(/line-(one|two)/);
  });

  it('each form is masked when the log is cut at any byte (the masker holds back the longest form minus one)', () => {
    const masker = new SecretMasker([CERT]);
    const longest = Math.max(...secretForms(CERT).map((f) => Buffer.byteLength(f)));
    expect(masker.maxSecretLength).toBe(longest);
    for (const form of secretForms(CERT)) {
      const text = `>> ${form} <<\n`;
      const expected = maskText(text, [CERT]);
      expect(expected).not.toContain(form);
      const bytes = Buffer.byteLength(text);
      for (let cut = 1; cut < bytes; cut++) {
        expect(maskInChunks(text, [CERT], [cut, 1, 2])).toBe(expected);
        expect(
          maskInChunks(
            text,
            [CERT],
            Array.from({ length: bytes }, () => cut),
          ),
        ).toBe(expected);
      }
    }
  });

  it('a value added later brings its forms along', () => {
    const masker = new SecretMasker();
    masker.add(CERT);
    const out = Buffer.concat([masker.write(Buffer.from('x line-one line-two y\n')), masker.end()]).toString();
    expect(out).toBe('x *** y\n');
  });
});
