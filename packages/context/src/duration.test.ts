// Cases follow go/src/time/time_test.go `parseDurationTests` and `durationTests`.
import { describe, expect, it } from 'vitest';
import { formatGoDuration, parseGoDuration } from './index.ts';

describe('parseGoDuration', () => {
  it.each([
    ['0', 0],
    ['5s', 5_000],
    ['30s', 30_000],
    ['1478s', 1_478_000],
    ['-5s', -5_000],
    ['+5s', 5_000],
    ['-0', 0],
    ['+0', 0],
    ['5.0s', 5_000],
    ['5.6s', 5_600],
    ['5.s', 5_000],
    ['.5s', 500],
    ['1.0s', 1_000],
    ['1.00s', 1_000],
    ['1.004s', 1_004],
    ['100.00100s', 100_001],
    ['10ns', 10e-6],
    ['11us', 11e-3],
    ['12µs', 12e-3],
    ['12μs', 12e-3],
    ['13ms', 13],
    ['14s', 14_000],
    ['15m', 900_000],
    ['16h', 57_600_000],
    ['3h30m', 12_600_000],
    ['10.5s4m', 250_500],
    ['-2m3.4s', -123_400],
    ['1h2m3s4ms5us6ns', 3_723_004.005006],
    ['39h9m14.425s', 140_954_425],
    ['52763797000ns', 52_763.797],
    ['0.3333333333333333333h', 1_200_000],
  ])('%s = %d ms', (text, ms) => expect(parseGoDuration(text)).toBeCloseTo(ms, 6));

  it.each(['', '3', '-', 's', '.', '-.', '.s', '+.s', '1d', '1 h', ' 1h', '1h ', '3000000h', '9223372036854775808ns', 'abc', '1.5.5s', '5m-3s'])(
    'rejects %j as Go does',
    (text) => expect(parseGoDuration(text)).toBeUndefined(),
  );
});

describe('formatGoDuration', () => {
  it.each([
    [0, '0s'],
    [1e-6, '1ns'],
    [1.1e-3, '1.1µs'],
    [2.2, '2.2ms'],
    [3_300, '3.3s'],
    [-(4 * 60_000 + 5_000), '-4m5s'],
    [4 * 60_000 + 5_001, '4m5.001s'],
    [5 * 3_600_000 + 6 * 60_000 + 7_001, '5h6m7.001s'],
    [8 * 60_000 + 1e-6, '8m0.000000001s'],
    [30 * 60_000, '30m0s'],
    [90 * 60_000, '1h30m0s'],
  ])('%d ms = %s', (ms, text) => expect(formatGoDuration(ms)).toBe(text));

  it('round-trips through parseGoDuration', () => {
    for (const ms of [0, 1, 999, 1_500, 61_000, 3_600_000, 5_400_000, 0.25]) expect(parseGoDuration(formatGoDuration(ms))).toBeCloseTo(ms, 6);
  });

  it('rejects what is not a number of milliseconds', () => {
    expect(() => formatGoDuration(Number.NaN)).toThrow(RangeError);
  });
});
