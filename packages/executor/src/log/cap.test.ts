import { describe, expect, it } from 'vitest';
import { formatBytes, LogCap } from './cap.ts';

function run(cap: LogCap, chunks: string[]): string {
  const out = chunks.map((c) => cap.write(Buffer.from(c)));
  out.push(cap.end());
  return Buffer.concat(out).toString('utf8');
}

describe('LogCap', () => {
  it('passes a log under the cap unchanged', () => {
    expect(run(new LogCap({ maxBytes: 100, tailBytes: 20 }), ['hello\n', 'world\n'])).toBe('hello\nworld\n');
  });

  it('keeps the head, marks the cut, and shows the last lines after a marker at the end', () => {
    const lines = Array.from({ length: 100 }, (_, i) => `line ${String(i).padStart(3, '0')}\n`); // 9 bytes each
    const out = run(new LogCap({ maxBytes: 200, tailBytes: 50 }), lines);
    expect(out.startsWith('line 000\n')).toBe(true);
    expect(out).toContain('[berth: this log is over its 200 B cap');
    expect(out).toMatch(/\[berth: log truncated: \d+ B of 900 B dropped \(cap 200 B\); the last \d+ B follow\]\n/);
    // The tail starts on a whole line and ends with the last one.
    const tail = out.slice(out.lastIndexOf('follow]\n') + 'follow]\n'.length);
    expect(tail.endsWith('line 099\n')).toBe(true);
    expect(tail.startsWith('line ')).toBe(true);
    expect(tail.length).toBeLessThanOrEqual(50);
    // Head + tail stay within the cap (markers aside).
    const head = out.slice(0, out.indexOf('\n[berth: this log'));
    expect(Buffer.byteLength(head) + Buffer.byteLength(tail)).toBeLessThanOrEqual(200);
  });

  it('never splits a multi-byte character at the head cut or at the tail start', () => {
    const text = '€'.repeat(1000); // 3 bytes each, no newline
    const out = run(new LogCap({ maxBytes: 100, tailBytes: 31 }), [text.slice(0, 500), text.slice(500)]);
    expect(out).not.toContain('\ufffd');
  });

  it('holds at most the tail in memory whatever the log size', () => {
    const cap = new LogCap({ maxBytes: 1024, tailBytes: 256 });
    const chunk = Buffer.alloc(64 * 1024, 0x61);
    let passed = 0;
    for (let i = 0; i < 64; i++) passed += cap.write(chunk).length;
    const end = cap.end();
    expect(cap.total).toBe(64 * 64 * 1024);
    expect(passed).toBeLessThan(1024 + 200);
    expect(end.length).toBeLessThan(256 + 200);
  });

  it('is disabled with an infinite cap', () => {
    const cap = new LogCap({ maxBytes: Infinity });
    const chunk = Buffer.alloc(1 << 20);
    expect(cap.write(chunk)).toBe(chunk);
    expect(cap.end().length).toBe(0);
  });

  it('formats sizes', () => {
    expect(formatBytes(512)).toBe('512 B');
    expect(formatBytes(5 * 1024 * 1024)).toBe('5.0 MiB');
    expect(formatBytes(1536)).toBe('1.5 KiB');
  });
});
