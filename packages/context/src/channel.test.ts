import { describe, expect, it } from 'vitest';
import { Canceled, Channel, ChannelClosed, DeadlineExceeded, background, sleep, withCancel, withTimeout } from './index.ts';
import { listenerCount, useAsyncLeakCheck } from './testing/index.ts';

useAsyncLeakCheck();

const flush = async (): Promise<void> => {
  for (let i = 0; i < 5; i++) await Promise.resolve();
};

describe('Channel', () => {
  it('unbuffered send waits for a receiver (rendezvous)', async () => {
    const ch = new Channel<number>();
    let sent = false;
    const sending = ch.send(background(), 1).then(() => {
      sent = true;
    });
    await flush();
    expect(sent).toBe(false);
    await expect(ch.receive(background())).resolves.toEqual({ value: 1, ok: true });
    await sending;
    expect(sent).toBe(true);
    // Receiver first, then sender.
    const receiving = ch.receive(background());
    await ch.send(background(), 2);
    await expect(receiving).resolves.toEqual({ value: 2, ok: true });
  });

  it('buffered send completes until the buffer is full; FIFO order is kept', async () => {
    const ch = new Channel<string>(2);
    await ch.send(background(), 'a');
    await ch.send(background(), 'b');
    expect(ch.length).toBe(2);
    let third = false;
    const sending = ch.send(background(), 'c').then(() => {
      third = true;
    });
    await flush();
    expect(third).toBe(false);
    expect(await ch.receive(background())).toEqual({ value: 'a', ok: true });
    await sending;
    expect(third).toBe(true);
    expect((await ch.receive(background())).value).toBe('b');
    expect((await ch.receive(background())).value).toBe('c');
  });

  it('close drains buffered values, then reports ok:false; senders reject ChannelClosed', async () => {
    const ch = new Channel<number>(3);
    await ch.send(background(), 1);
    await ch.send(background(), 2);
    ch.close();
    ch.close();
    expect(ch.closed).toBe(true);
    await expect(ch.send(background(), 3)).rejects.toBeInstanceOf(ChannelClosed);
    expect(await ch.receive(background())).toEqual({ value: 1, ok: true });
    expect(await ch.receive(background())).toEqual({ value: 2, ok: true });
    expect(await ch.receive(background())).toEqual({ value: undefined, ok: false });
  });

  it('close wakes waiting receivers (ok:false) and waiting senders (ChannelClosed)', async () => {
    const rx = new Channel<number>();
    const receiving = rx.receive(background());
    const tx = new Channel<number>();
    const sending = tx.send(background(), 1);
    rx.close();
    tx.close();
    await expect(receiving).resolves.toEqual({ value: undefined, ok: false });
    await expect(sending).rejects.toBeInstanceOf(ChannelClosed);
  });

  it('ctx cancel unblocks a waiting receiver and a waiting sender, and removes their listeners', async () => {
    const ch = new Channel<number>();
    const [ctx, cancel] = withCancel(background());
    const receiving = ch.receive(ctx);
    await flush();
    expect(listenerCount(ctx.signal)).toBe(1);
    cancel('stop');
    await expect(receiving).rejects.toBe(ctx.err());
    expect(listenerCount(ctx.signal)).toBe(0);

    const [sendCtx, cancelSend] = withTimeout(background(), 5);
    await expect(ch.send(sendCtx, 1)).rejects.toBeInstanceOf(DeadlineExceeded);
    cancelSend();
    // The cancelled sender's value is gone: a later receiver does not see it.
    const later = ch.receive(background());
    await ch.send(background(), 2);
    expect(await later).toEqual({ value: 2, ok: true });
  });

  it('a delivered value removes the waiter listener', async () => {
    const ch = new Channel<number>();
    const [ctx, cancel] = withCancel(background());
    const receiving = ch.receive(ctx);
    await ch.send(ctx, 5);
    expect(await receiving).toEqual({ value: 5, ok: true });
    expect(listenerCount(ctx.signal)).toBe(0);
    const sending = ch.send(ctx, 6);
    expect(listenerCount(ctx.signal)).toBe(1);
    expect(await ch.receive(ctx)).toEqual({ value: 6, ok: true });
    await sending;
    expect(listenerCount(ctx.signal)).toBe(0);
    cancel();
  });

  it('a done ctx rejects even when a value is ready', async () => {
    const ch = new Channel<number>(1);
    await ch.send(background(), 1);
    const [ctx, cancel] = withCancel(background());
    cancel();
    await expect(ch.receive(ctx)).rejects.toBeInstanceOf(Canceled);
    await expect(ch.send(ctx, 2)).rejects.toBeInstanceOf(Canceled);
  });

  it('async iteration ends when closed and drained', async () => {
    const ch = new Channel<number>();
    const producer = (async () => {
      for (let i = 0; i < 5; i++) await ch.send(background(), i);
      ch.close();
    })();
    const got: number[] = [];
    for await (const v of ch) got.push(v);
    await producer;
    expect(got).toEqual([0, 1, 2, 3, 4]);
  });

  it('iterate(ctx) rejects with ctx.err() when the ctx ends first', async () => {
    const ch = new Channel<number>(10);
    await ch.send(background(), 1);
    const [ctx, cancel] = withCancel(background());
    const got: number[] = [];
    const consuming = (async () => {
      for await (const v of ch.iterate(ctx)) got.push(v);
    })();
    await sleep(background(), 5);
    cancel('enough');
    await expect(consuming).rejects.toBe(ctx.err());
    expect(got).toEqual([1]);
  });

  it('many producers and consumers: every value delivered exactly once', async () => {
    const ch = new Channel<number>(2);
    const received: number[] = [];
    const consumers = Array.from({ length: 3 }, async () => {
      for await (const v of ch) received.push(v);
    });
    await Promise.all(
      Array.from({ length: 4 }, async (_, p) => {
        for (let i = 0; i < 50; i++) await ch.send(background(), p * 100 + i);
      }),
    );
    ch.close();
    await Promise.all(consumers);
    expect(received.sort((a, b) => a - b)).toEqual(Array.from({ length: 4 }, (_, p) => Array.from({ length: 50 }, (_, i) => p * 100 + i)).flat());
  });

  it('rejects a bad capacity', () => {
    expect(() => new Channel(-1)).toThrow(RangeError);
  });
});
