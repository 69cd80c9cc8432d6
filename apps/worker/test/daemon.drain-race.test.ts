// The drain race: an item Redis hands to the worker's BLPOP just as the drain starts. The worker
// must not claim it (the drain has begun) and must not lose it (Redis already removed it): it goes
// back to the head of its route and the build stays pending for another worker.
//
// A TCP proxy between the worker and the real Redis holds the BLPOP connection's replies, so the
// pop is answered by Redis before the drain starts but reaches the worker only after it.
import { randomUUID } from 'node:crypto';
import net from 'node:net';
import { VelaSim } from '@berth/vela-sim';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IMAGE, type WorkerHandle, executable, startWorker, uniqueRoute, waitFor } from './daemon-harness.ts';

/** A Redis proxy that can hold the replies of every connection that issued a BLPOP. */
class HoldingProxy {
  readonly #server = net.createServer((client) => this.#accept(client));
  readonly #sockets = new Set<net.Socket>();
  readonly #released: Array<() => void> = [];
  /** While true, replies to BLPOP connections are buffered instead of forwarded. */
  holding = false;
  /** Bytes currently held back. */
  heldBytes = 0;
  /** Connections that have issued a BLPOP. */
  blpopConnections = 0;

  readonly upstreamPort: number;

  constructor(upstreamPort: number) {
    this.upstreamPort = upstreamPort;
  }

  async listen(): Promise<string> {
    await new Promise<void>((resolve) => this.#server.listen(0, '127.0.0.1', resolve));
    return `redis://127.0.0.1:${(this.#server.address() as net.AddressInfo).port}`;
  }

  /** Forwards everything held, in order, and stops holding. */
  release(): void {
    this.holding = false;
    for (const flush of this.#released.splice(0)) flush();
  }

  async close(): Promise<void> {
    for (const socket of this.#sockets) socket.destroy();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  #accept(client: net.Socket): void {
    const upstream = net.connect(this.upstreamPort, '127.0.0.1');
    this.#sockets.add(client).add(upstream);
    let blpop = false;
    const held: Buffer[] = [];
    client.on('data', (chunk: Buffer) => {
      if (!blpop && /blpop/i.test(chunk.toString('latin1'))) {
        blpop = true;
        this.blpopConnections++;
      }
      upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      if (blpop && this.holding) {
        if (held.length === 0) {
          this.#released.push(() => {
            for (const b of held.splice(0)) client.write(b);
            this.heldBytes = 0;
          });
        }
        held.push(chunk);
        this.heldBytes += chunk.length;
        return;
      }
      client.write(chunk);
    });
    const end = (): void => {
      client.destroy();
      upstream.destroy();
      this.#sockets.delete(client);
      this.#sockets.delete(upstream);
    };
    client.on('close', end).on('error', end);
    upstream.on('close', end).on('error', end);
  }
}

let sim: VelaSim;

beforeAll(async () => {
  sim = await VelaSim.start();
});

afterAll(async () => {
  await sim?.close();
});

/**
 * Starts a worker behind a holding proxy, lets Redis answer its BLPOP with an item while the reply
 * is held, starts the drain, releases the reply after `holdMs`, and checks the item went back.
 */
async function race(holdMs: number): Promise<void> {
  const route = uniqueRoute('drain-race');
  const proxy = new HoldingProxy(Number(new URL(sim.queueAddr).port || 6379));
  const queueAddr = await proxy.listen();
  // A long pop: the BLPOP that Redis answers is the one the worker has open when the drain starts.
  const worker: WorkerHandle = await startWorker(sim, { route, env: { VELA_QUEUE_ADDR: queueAddr, VELA_QUEUE_POP_TIMEOUT: '30s', VELA_LOG_LEVEL: 'info' } });
  const redis = sim.redis();
  try {
    await waitFor('the worker to register', () => worker.daemon.registered);
    await waitFor('the worker to open a BLPOP', () => proxy.blpopConnections > 0);
    const repo = `race-${randomUUID().slice(0, 8)}`;
    const pipeline = executable(`version: "1"\nsteps:\n  - name: never\n    image: ${IMAGE}\n    pull: never\n    commands: [ "echo must not run" ]\n`, {
      org: 'octo',
      repo,
      number: 1,
    });
    const { build } = await sim.enqueueBuild({ org: 'octo', repo, number: 1, pipeline, route, noPush: true });
    const itemBytes = sim.sign(JSON.stringify({ build, item_version: 3 }));
    const newer = sim.sign(JSON.stringify({ build: { ...build, id: build.id! + 1_000_000 }, item_version: 3 }));

    proxy.holding = true;
    await redis.rpush(route, itemBytes);
    // Redis has handed the item to the worker's BLPOP (the list is empty) but the worker has not seen it.
    await waitFor('Redis to answer the BLPOP', () => proxy.heldBytes > 0, 10_000, 20);
    expect(await redis.llen(route)).toBe(0);
    // Another item arrives behind it: the pushed-back item must come out first again.
    await redis.rpush(route, newer);

    const stopped = worker.daemon.shutdown('drain race test');
    await waitFor('the drain to start', () => worker.logged(/^draining/).length > 0, 5_000, 20);
    await new Promise((r) => setTimeout(r, holdMs));
    proxy.release();
    await stopped;

    expect(worker.logged(/queue item pushed back/)).toHaveLength(1);
    expect(await redis.lrangeBuffer(route, 0, -1)).toEqual([itemBytes, newer]);
    expect(sim.builds.get(build.id!)).toMatchObject({ status: 'pending' });
    expect(sim.stepsOf(build.id!).map((step) => step.status)).toEqual(['pending', 'pending']);
    expect(sim.callsTo('GET', `/api/v1/repos/octo/${repo}/builds/1/token`)).toEqual([]);
  } finally {
    proxy.release();
    await worker.stop();
    await proxy.close();
    await redis.del(route);
  }
}

describe('drain race', { timeout: 60_000 }, () => {
  it('an item popped by Redis as the drain starts is pushed back to the head of its route, unclaimed', async () => {
    await race(300);
  });

  it('the same when the reply takes longer than the unblock attempts used to last (6 s): nothing is dropped', async () => {
    await race(6_000);
  });
});
