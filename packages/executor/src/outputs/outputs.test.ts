import { describe, expect, it } from 'vitest';
import { decodeStdBase64, parseEnvFile } from './env-file.ts';
import { applyOutputs, decodeOutputs, missingImageNames, NO_OUTPUTS, sameOutputs } from './outputs.ts';

const bytes = (text: string): Uint8Array => Buffer.from(text, 'utf8');

// hashicorp/go-envparse envparse.go Parse/parseLine, as go-vela/worker executor/linux/outputs.go poll uses it.
describe('parseEnvFile (go-envparse Parse)', () => {
  it('reads KEY=VALUE lines, comments, export, quotes and escapes', () => {
    const text = [
      '# a comment',
      '',
      'A=1',
      'export B = two words ',
      'C="x\\ny \\u00e9"',
      "D='single $X'",
      'E=value # trailing comment',
      'F=',
      'g.h/i=k',
      'CRLF=yes\r',
    ].join('\n');
    expect(parseEnvFile(text)).toEqual({
      ok: true,
      values: { A: '1', B: 'two words', C: 'x\ny é', D: 'single $X', E: 'value', 'g.h/i': 'k', CRLF: 'yes' },
    });
  });

  it('drops the whole file on one bad line, naming the line (go-envparse returns nil, err)', () => {
    expect(parseEnvFile('A=1\nnot a pair\nB=2\n')).toEqual({ ok: false, line: 2, error: 'missing =', values: {} });
    expect(parseEnvFile('1A=x')).toMatchObject({ ok: false, error: 'key must start with [A-Za-z_] but found "1"' });
    expect(parseEnvFile('A="open')).toMatchObject({ ok: false, error: 'unmatched "' });
    expect(parseEnvFile('A=x\tb')).toMatchObject({ ok: false, error: '0x09 is an invalid value character' });
  });
});

// Go base64.StdEncoding.DecodeString.
describe('decodeStdBase64', () => {
  it('decodes padded standard base64 and refuses what Go refuses', () => {
    expect(decodeStdBase64('aGVsbG8=')).toBe('hello');
    expect(decodeStdBase64('aGVs\nbG8=')).toBe('hello');
    expect(decodeStdBase64('aGVsbG8')).toBeUndefined(); // unpadded
    expect(decodeStdBase64('aGVs_G8=')).toBeUndefined(); // URL alphabet
    expect(decodeStdBase64('not base64!')).toBeUndefined();
  });
});

// go-vela/worker executor/linux/outputs.go outputSvc.poll.
describe('decodeOutputs (outputSvc.poll)', () => {
  it('reads plain, masked and base64 files; base64 wins within its map', () => {
    const { outputs, warnings } = decodeOutputs({
      '.env': bytes('TAG=1.35\nSAME=plain\n'),
      'masked.env': bytes('TOKEN=s3cret\n'),
      'base64.env': bytes(`SAME=${Buffer.from('from base64').toString('base64')}\n`),
      'masked.base64.env': bytes(`PASS=${Buffer.from('multi\nline').toString('base64')}\n`),
    });
    expect(outputs).toEqual({ plain: { TAG: '1.35', SAME: 'from base64' }, masked: { TOKEN: 's3cret', PASS: 'multi\nline' } });
    expect(warnings).toEqual([]);
  });

  it('ignores a file that does not parse and keeps a value that is not base64 as written, with warnings', () => {
    const { outputs, warnings } = decodeOutputs({
      '.env': bytes('garbage line\nA=1\n'),
      'base64.env': bytes('B=%%%\n'),
      'masked.env': undefined,
    });
    expect(outputs).toEqual({ plain: { B: '%%%' }, masked: {} });
    expect(warnings).toEqual([
      '/vela/outputs/.env was ignored: line 1: missing = (write KEY=VALUE lines)',
      '/vela/outputs/base64.env: the value of B is not padded standard base64; it is used as written',
    ]);
  });
});

// go-vela/worker internal/outputs/process.go Process.
describe('applyOutputs (Process)', () => {
  it('never overwrites the step environment, resolves $KEY values, lets masked win, returns non-blank masked values', () => {
    const env: Record<string, string> = { OWN: 'mine', REF: '$TAG', OTHER: '$UNKNOWN' };
    const masked = applyOutputs(env, { plain: { OWN: 'theirs', TAG: '1', BOTH: 'plain' }, masked: { BOTH: 'secret', BLANK: '  ' } });
    expect(env).toEqual({ OWN: 'mine', REF: '1', OTHER: '$UNKNOWN', TAG: '1', BOTH: 'secret', BLANK: '  ' });
    expect(masked).toEqual(['secret']);
  });
});

describe('sameOutputs', () => {
  it('is true for the same names and values in any order, false when a value, a name or its kind differs', () => {
    const a = { plain: { A: '1', B: '2' }, masked: { T: 's' } };
    expect(sameOutputs(a, { plain: { B: '2', A: '1' }, masked: { T: 's' } })).toBe(true);
    expect(sameOutputs(NO_OUTPUTS, { plain: {}, masked: {} })).toBe(true);
    expect(sameOutputs(a, { plain: { A: '1', B: '3' }, masked: { T: 's' } })).toBe(false);
    expect(sameOutputs(a, { plain: { A: '1' }, masked: { T: 's' } })).toBe(false);
    expect(sameOutputs(a, { plain: { A: '1', C: '2' }, masked: { T: 's' } })).toBe(false);
    expect(sameOutputs(a, { plain: { A: '1', B: '2', T: 's' }, masked: {} })).toBe(false);
    expect(sameOutputs(NO_OUTPUTS, { plain: { A: '' }, masked: {} })).toBe(false);
  });
});

describe('missingImageNames', () => {
  it('names the plain ${NAME} references the environment lacks', () => {
    expect(missingImageNames('my-org/${IMAGE}:${TAG}', { TAG: '1' })).toEqual(['IMAGE']);
    expect(missingImageNames('alpine:${TAG:-3}', {})).toEqual([]);
    expect(missingImageNames('alpine:$${TAG}', {})).toEqual([]);
    expect(missingImageNames('alpine:3', {})).toEqual([]);
  });
});
