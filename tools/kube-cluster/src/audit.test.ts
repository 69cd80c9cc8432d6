import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { readAudit } from './audit.ts';

const line = (auditID: string, stage: string, verb: string, at: string): string =>
  JSON.stringify({ auditID, stage, verb, requestURI: '/api/v1/namespaces/n/pods', user: { username: 'berth' }, requestReceivedTimestamp: at });

describe('readAudit', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'berth-audit-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'audit.log');
  writeFileSync(
    file,
    [
      line('a', 'ResponseComplete', 'list', '2026-12-04T20:00:00.000100Z'),
      line('w', 'ResponseStarted', 'watch', '2026-12-04T20:00:01.500000Z'),
      line('b', 'ResponseComplete', 'patch', '2026-12-04T20:00:02.000000Z'),
      line('w', 'ResponseComplete', 'watch', '2026-12-04T20:00:01.500000Z'),
      line('c', 'ResponseComplete', 'delete', '2026-12-04T20:00:03.000000Z'),
      '{"auditID":"d","sta',
    ].join('\n'),
  );

  it('gives one event per request in the window, a watch once, and skips a partly written line', () => {
    const events = readAudit(file, Date.parse('2026-12-04T20:00:01Z'), Date.parse('2026-12-04T20:00:03Z'));
    expect(events.map((e) => [e.auditID, e.stage, e.verb])).toEqual([
      ['w', 'ResponseStarted', 'watch'],
      ['b', 'ResponseComplete', 'patch'],
    ]);
    expect(events[0]?.receivedMs).toBe(Date.parse('2026-12-04T20:00:01.500Z'));
  });
});
