import { describe, expect, it } from 'vitest';
import { httpDate, httpDateNow } from './http-date.ts';

describe('httpDate', () => {
  it('formats as Date.prototype.toUTCString does (IMF-fixdate), across years 0 to 9999', () => {
    const fixed = [0, Date.UTC(1994, 10, 6, 8, 49, 37), Date.UTC(2024, 1, 29, 23, 59, 59, 999), Date.UTC(999, 0, 1), Date.UTC(9999, 11, 31, 23, 59, 59)];
    for (const ms of fixed) expect(httpDate(ms)).toBe(new Date(ms).toUTCString());
    let seed = 28;
    const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    // Date.UTC maps years 0-99 to 1900-1999: the year 0 set on a date.
    const [min, max] = [new Date(0).setUTCFullYear(0, 0, 1), Date.UTC(9999, 11, 31)];
    for (let i = 0; i < 2000; i++) {
      const ms = Math.floor(min + random() * (max - min));
      expect(httpDate(ms)).toBe(new Date(ms).toUTCString());
    }
    expect(httpDate(Date.UTC(1994, 10, 6, 8, 49, 37))).toBe('Sun, 06 Nov 1994 08:49:37 GMT');
  });

  it('httpDateNow is the current second', () => {
    const before = Math.floor(Date.now() / 1000) * 1000;
    const now = Date.parse(httpDateNow());
    expect(now).toBeGreaterThanOrEqual(before);
    expect(now).toBeLessThanOrEqual(Date.now());
  });
});
