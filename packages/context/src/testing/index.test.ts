import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import { background, withCancel, withTimeout } from '../index.ts';
import { AsyncLeakError, expectNoAsyncLeaks, listenerCount, trackAsyncResources, useAsyncLeakCheck } from './index.ts';

describe('trackAsyncResources', () => {
  it('reports a leaked setInterval with its creation stack', async () => {
    const tracker = trackAsyncResources();
    const handle = setInterval(() => undefined, 1000);
    const report = await tracker.stop();
    clearInterval(handle);
    expect(report.ok).toBe(false);
    expect(report.byType).toEqual({ Timeout: 1 });
    expect(report.live[0]?.ref).toBe(true);
    expect(report.live[0]?.stack.join('\n')).toContain('index.test.ts');
    expect(report.live[0]?.stack.length).toBeLessThanOrEqual(5);
    expect(report.format()).toContain('Timeout');
  });

  it('passes when the interval is cleared', async () => {
    const tracker = trackAsyncResources();
    const handle = setInterval(() => undefined, 1000);
    clearInterval(handle);
    const report = await tracker.stop();
    expect(report.live).toEqual([]);
    expect(report.ok).toBe(true);
  });

  it('reports unref timers unless allowed', async () => {
    const strict = trackAsyncResources();
    const a = setInterval(() => undefined, 1000).unref();
    const strictReport = await strict.stop();
    const lax = trackAsyncResources({ allowUnrefTimers: true });
    const b = setInterval(() => undefined, 1000).unref();
    const laxReport = await lax.stop();
    clearInterval(a);
    clearInterval(b);
    expect(strictReport.live.map((r) => r.ref)).toEqual([false]);
    expect(laxReport.ok).toBe(true);
  });

  it('honours ignore', async () => {
    const tracker = trackAsyncResources({ ignore: ['Timeout'] });
    const handle = setInterval(() => undefined, 1000);
    const report = await tracker.stop();
    clearInterval(handle);
    expect(report.ok).toBe(true);
  });
});

describe('expectNoAsyncLeaks', () => {
  it('catches a leaked net server', async () => {
    const server = createServer();
    const error = await expectNoAsyncLeaks(async () => {
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    }).then(
      () => undefined,
      (e: unknown) => e,
    );
    await new Promise<void>((resolve) => server.close(() => resolve()));
    expect(error).toBeInstanceOf(AsyncLeakError);
    expect((error as AsyncLeakError).report.byType).toMatchObject({ TCPSERVERWRAP: 1 });
    expect((error as AsyncLeakError).message).toContain('TCPSERVERWRAP');
  });

  it('passes when the server (and a client socket) are closed', async () => {
    await expectNoAsyncLeaks(async () => {
      const server = createServer((socket) => socket.end());
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      const address = server.address();
      if (address === null || typeof address === 'string') throw new Error('no port');
      const { connect } = await import('node:net');
      await new Promise<void>((resolve, reject) => {
        const client = connect(address.port, '127.0.0.1');
        client.on('error', reject);
        client.resume();
        client.on('close', () => resolve());
      });
      await new Promise<void>((resolve) => server.close(() => resolve()));
    });
  });

  it('catches a context timer that was never cancelled, and passes when it is', async () => {
    let cancelLeaked: (() => void) | undefined;
    await expect(
      expectNoAsyncLeaks(() => {
        cancelLeaked = withTimeout(background(), 60_000)[1];
      }),
    ).rejects.toBeInstanceOf(AsyncLeakError);
    cancelLeaked?.();
    await expectNoAsyncLeaks(() => {
      const [, cancel] = withTimeout(background(), 60_000);
      cancel();
    });
  });

  it("rethrows fn's own error", async () => {
    const boom = new Error('boom');
    await expect(expectNoAsyncLeaks(() => Promise.reject(boom))).rejects.toBe(boom);
  });
});

describe('listenerCount', () => {
  it('counts abort listeners of a context signal', () => {
    const [parent, cancel] = withCancel(background());
    const [, cancelChild] = withCancel(parent);
    expect(listenerCount(parent.signal)).toBe(1);
    cancelChild();
    expect(listenerCount(parent.signal)).toBe(0);
    cancel();
  });
});

describe('useAsyncLeakCheck', () => {
  useAsyncLeakCheck();

  it('lets a clean test pass', async () => {
    const [ctx, cancel] = withTimeout(background(), 60_000);
    await new Promise((resolve) => setTimeout(resolve, 1));
    cancel();
    expect(ctx.err()).toBeDefined();
  });
});
