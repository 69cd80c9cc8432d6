import { afterEach, describe, expect, it } from 'vitest';
import { background, withCancel } from '@berth/context';
import { isRuntimeError } from '@berth/runtime';
import { eventually, type FakeApi, startFakeApi } from '../test/fake-api.ts';
import { followLogs, type FollowStats, sinceTimeOf, timestampNanos, TimestampedLines } from './log-follower.ts';

describe('TimestampedLines', () => {
  it('strips timestamps and keeps a partial line until it is complete', () => {
    const lines = new TimestampedLines();
    expect(lines.push(Buffer.from('2024-01-01T00:00:00.1Z a\n2024-01-01T00:00:00.2Z b')).toString()).toBe('a\n');
    expect(lines.push(Buffer.from('c\n')).toString()).toBe('bc\n');
    expect(lines.flush().toString()).toBe('');
    lines.push(Buffer.from('2024-01-01T00:00:01Z no-newline'));
    expect(lines.flush().toString()).toBe('no-newline');
  });

  it('on a resume skips older lines and as many lines at the last timestamp as were seen', () => {
    const lines = new TimestampedLines();
    const first = lines.push(Buffer.from('2024-01-01T00:00:05.5Z one\n2024-01-01T00:00:05.7Z two\n2024-01-01T00:00:05.7Z three\n2024-01-01T00:00:05.7Z fo'));
    expect(first.toString()).toBe('one\ntwo\nthree\n');
    expect(lines.resumeFrom()).toBe('2024-01-01T00:00:05Z');
    lines.restart();
    const again = lines.push(
      Buffer.from(
        '2024-01-01T00:00:05.5Z one\n2024-01-01T00:00:05.7Z two\n2024-01-01T00:00:05.7Z three\n2024-01-01T00:00:05.7Z four\n2024-01-01T00:00:06Z five\n',
      ),
    );
    expect(again.toString()).toBe('four\nfive\n');
    expect(lines.skipped).toBe(3);
  });

  /**
   * The kubelet rotates a container's log (containerLogMaxSize) by renaming the file; a follow
   * (kubernetes/kubernetes staging cri-client pkg/logs/logs.go ReadLogs) that is on the old file
   * when the container exits reads it to its end and stops (waitLogs: "no need to wait if the
   * pod is not running"), and a new request reads only the current file. A line whose start
   * (a partial `P` record, served with its timestamp and no newline) is in the old file is then
   * never served again: its continuation comes first in the next stream, under a timestamp of
   * its own. The start must be kept and joined to it, not dropped as a re-read would allow.
   */
  it('on a resume after a rotation keeps a partial line whose start is not served again, and joins its continuation', () => {
    const lines = new TimestampedLines();
    expect(lines.push(Buffer.from('2024-01-01T00:00:05.5Z one\n2024-01-01T00:00:05.7Z par')).toString()).toBe('one\n');
    lines.restart();
    // The new file: the rest of the line (its own timestamp), then more.
    expect(lines.push(Buffer.from('2024-01-01T00:00:05.9Z tial\n2024-01-01T00:00:06Z two\n')).toString()).toBe('partial\ntwo\n');
    expect(lines.flush().toString()).toBe('');
  });

  it('on a resume after a rotation that left nothing newer, ends with the partial line', () => {
    const lines = new TimestampedLines();
    expect(lines.push(Buffer.from('2024-01-01T00:00:05.5Z one\n2024-01-01T00:00:05.7Z no-newline')).toString()).toBe('one\n');
    lines.restart();
    expect(lines.push(Buffer.from('2024-01-01T00:00:05.5Z one\n')).toString()).toBe('');
    expect(lines.flush().toString()).toBe('no-newline');
  });

  it('on a resume that serves the partial line again (a cut stream), delivers it once', () => {
    const lines = new TimestampedLines();
    expect(lines.push(Buffer.from('2024-01-01T00:00:05.5Z one\n2024-01-01T00:00:05.7Z par')).toString()).toBe('one\n');
    lines.restart();
    expect(lines.push(Buffer.from('2024-01-01T00:00:05.5Z one\n2024-01-01T00:00:05.7Z partial\n2024-01-01T00:00:06Z two\n')).toString()).toBe('partial\ntwo\n');
    expect(lines.flush().toString()).toBe('');
  });

  it('parses RFC 3339 timestamps to nanoseconds', () => {
    expect(timestampNanos('1970-01-01T00:00:01.000000002Z')).toBe(1_000_000_002n);
    expect(timestampNanos('1970-01-01T01:00:00+01:00')).toBe(0n);
    expect(timestampNanos('nope')).toBeUndefined();
    expect(sinceTimeOf(1_999_999_999n)).toBe('1970-01-01T00:00:01Z');
  });
});

/** A log of `count` lines, several sharing each timestamp, as the kubelet serves it with timestamps=true. */
function makeLog(count: number): { ts: bigint; line: string }[] {
  const base = BigInt(Date.parse('2024-05-01T10:00:00Z')) * 1_000_000n;
  return Array.from({ length: count }, (_, i) => ({ ts: base + BigInt(Math.floor(i / 3)) * 400_000_000n, line: `line ${i}\n` }));
}

function render(ts: bigint): string {
  const ms = Number(ts / 1_000_000n);
  const nanos = (ts % 1_000_000_000n).toString().padStart(9, '0');
  return `${new Date(ms).toISOString().slice(0, 19)}.${nanos}Z`;
}

describe('followLogs', () => {
  let api: FakeApi | undefined;
  afterEach(async () => {
    await api?.close();
    api = undefined;
  });

  it('resumes cut streams with sinceTime and delivers every line exactly once', async () => {
    const log = makeLog(200);
    let finished = false;
    let requests = 0;
    api = await startFakeApi(({ url, res }) => {
      requests++;
      expect(url.pathname).toBe('/api/v1/namespaces/ns/pods/pod/log');
      expect(url.searchParams.get('timestamps')).toBe('true');
      const since = url.searchParams.get('sinceTime');
      const from = since ? BigInt(Date.parse(since)) * 1_000_000n : 0n;
      const body = log
        .filter((l) => l.ts >= from)
        .map((l) => `${render(l.ts)} ${l.line}`)
        .join('');
      res.writeHead(200, { 'content-type': 'text/plain' });
      if (requests <= 4) {
        // Cut mid-line after a while, like a proxy dropping the connection.
        res.write(body.slice(0, 700 + requests * 13));
        setTimeout(() => res.socket?.destroy(), 20);
        return;
      }
      finished = true;
      res.end(body);
    });
    const stats: FollowStats = { requests: 0, resumes: 0, linesSkipped: 0 };
    const stream = followLogs(
      background(),
      { operation: 'tailContainer', subject: 'step' },
      {
        kc: api.kc,
        namespace: 'ns',
        podName: 'pod',
        containerName: 'c',
        waitStarted: () => Promise.resolve(true),
        isFinished: () => finished,
        isGone: () => false,
        waitFinished: (ms) => new Promise((resolve) => setTimeout(resolve, Math.min(ms, 20))),
        isReplaced: () => false,
        onChange: () => () => undefined,
      },
      stats,
    );
    const chunks: Buffer[] = [];
    for await (const chunk of stream) chunks.push(chunk as Buffer);
    expect(Buffer.concat(chunks).toString()).toBe(log.map((l) => l.line).join(''));
    expect(stats.requests).toBeGreaterThanOrEqual(6);
    expect(api.requests.slice(1).every((r) => r.url.searchParams.has('sinceTime'))).toBe(true);
  });

  it('is destroyed with Canceled when its ctx ends, and closes the request', async () => {
    api = await startFakeApi(({ res }) => {
      res.writeHead(200);
      res.write('2024-05-01T10:00:00Z started\n');
    });
    const [ctx, cancel] = withCancel(background());
    const stream = followLogs(
      ctx,
      { operation: 'tailContainer' },
      {
        kc: api.kc,
        namespace: 'ns',
        podName: 'pod',
        containerName: 'c',
        waitStarted: () => Promise.resolve(true),
        isFinished: () => false,
        isGone: () => false,
        waitFinished: () => Promise.resolve(),
        isReplaced: () => false,
        onChange: () => () => undefined,
      },
    );
    let seen = '';
    stream.on('data', (chunk: Buffer) => (seen += chunk.toString()));
    const error = new Promise<unknown>((resolve) => stream.on('error', resolve));
    await eventually(() => seen === 'started\n');
    cancel();
    expect(isRuntimeError(await error, 'Canceled')).toBe(true);
    await eventually(() => api?.openSockets() === 0);
  });

  it('ends without output when the container never started', async () => {
    api = await startFakeApi(({ res }) => res.end());
    const stream = followLogs(
      background(),
      { operation: 'tailContainer' },
      {
        kc: api.kc,
        namespace: 'ns',
        podName: 'pod',
        containerName: 'c',
        waitStarted: () => Promise.resolve(false),
        isFinished: () => true,
        isGone: () => false,
        waitFinished: () => Promise.resolve(),
        isReplaced: () => false,
        onChange: () => () => undefined,
      },
    );
    const chunks: unknown[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks).toEqual([]);
    expect(api.requests).toHaveLength(0);
  });
});
