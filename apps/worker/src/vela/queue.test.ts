import { randomUUID } from 'node:crypto';
import { background, withCancel } from '@berth/context';
import { ITEM_VERSION, VelaSim, generateQueueKeys, signCombined } from '@berth/vela-sim';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { claimBuild } from './claim.ts';
import { VelaClient } from './client.ts';
import { type PopResult, SUPPORTED_ITEM_VERSION, VelaQueue } from './queue.ts';

let sim: VelaSim;
const queues: VelaQueue[] = [];
beforeAll(async () => {
  sim = await VelaSim.start();
});
afterAll(async () => {
  for (const q of queues) q.close();
  await sim.close();
});

const pipeline = { version: '1', steps: [{ name: 'init', image: '#init', number: 1 }] };

function newQueue(route: string, popTimeoutSec = 1): VelaQueue {
  const q = new VelaQueue({ url: sim.queueAddr, publicKey: sim.queueKeys.publicKeyBase64, routes: [route], popTimeoutSec });
  queues.push(q);
  return q;
}

function route(): string {
  return `berth-test-${randomUUID()}`;
}

describe('VelaQueue', () => {
  it('supports the server item version', () => {
    expect(SUPPORTED_ITEM_VERSION).toBe(ITEM_VERSION);
  });

  it('pops, verifies and parses a good item; the build can then be claimed', async () => {
    const r = route();
    const q = newQueue(r);
    const { build } = await sim.enqueueBuild({ org: 'octo', repo: `q-${randomUUID().slice(0, 6)}`, pipeline, route: r });
    const res = await q.pop(background());
    expect(res.kind).toBe('item');
    if (res.kind !== 'item') return;
    expect(res.entry.route).toBe(r);
    expect(res.item.build).toMatchObject({ id: build.id, number: build.number, repo: { org: 'octo', name: build.repo!.name } });
    const worker = new VelaClient({ address: sim.url, token: sim.secret });
    const claim = await claimBuild(background(), worker, res.item);
    expect(claim.kind).toBe('claimed');
    // The server adds the SCM token to the executable (S api/build/compile_publish.go).
    if (claim.kind === 'claimed')
      expect(claim.pipeline).toEqual({ ...pipeline, id: expect.any(String) as unknown, token: expect.stringMatching(/^gho_/) as unknown, token_exp: 0 });
  });

  it('reports a bad signature, with what the item claims marked unverified', async () => {
    const r = route();
    const q = newQueue(r);
    const forged = signCombined(
      generateQueueKeys().privateKey,
      Buffer.from(JSON.stringify({ build: { id: 7, number: 3, repo: { org: 'o', name: 'n' } }, item_version: 3 })),
    );
    await sim.pushRaw(r, forged);
    const res = await q.pop(background());
    expect(res).toMatchObject({ kind: 'bad-signature', unverified: { id: 7, number: 3, org: 'o', repo: 'n' } });
    // A tampered byte also fails.
    const good = sim.sign(JSON.stringify({ build: { id: 8, number: 1, repo: { org: 'o', name: 'n' } }, item_version: 3 }));
    good.writeUInt8(good.readUInt8(good.length - 2) ^ 1, good.length - 2);
    await sim.pushRaw(r, good);
    expect((await q.pop(background())).kind).toBe('bad-signature');
    // Too short to hold a signature.
    await sim.pushRaw(r, Buffer.from('hi'));
    expect((await q.pop(background())).kind).toBe('bad-signature');
  });

  it('reports signed garbage and signed JSON that is not an item', async () => {
    const r = route();
    const q = newQueue(r);
    await sim.pushRaw(r, sim.sign('{not json'));
    const garbage = await q.pop(background());
    expect(garbage).toMatchObject({ kind: 'bad-item' });
    if (garbage.kind === 'bad-item') expect(garbage.reason).toMatch(/not JSON/);
    await sim.pushRaw(r, sim.sign(JSON.stringify({ build: { id: 9, number: 'x' }, item_version: 3 })));
    const shape = await q.pop(background());
    expect(shape).toMatchObject({ kind: 'bad-item', build: { id: 9 } });
    if (shape.kind === 'bad-item') expect(shape.reason).toMatch(/build\.number/);
  });

  it('reports a stale item version (and a missing one as version 0)', async () => {
    const r = route();
    const q = newQueue(r);
    await sim.enqueueBuild({ org: 'octo', repo: `q-${randomUUID().slice(0, 6)}`, pipeline, route: r, itemVersion: 2 });
    expect(await q.pop(background())).toMatchObject({ kind: 'stale', version: 2 });
    await sim.pushRaw(r, sim.sign(JSON.stringify({ build: { id: 1, number: 1, repo: { org: 'o', name: 'n' } } })));
    expect(await q.pop(background())).toMatchObject({ kind: 'stale', version: 0 });
  });

  it('an item for a build the server does not know: claiming says unknown-build; a cancelled one: not-pending', async () => {
    const r = route();
    const q = newQueue(r);
    await sim.pushRaw(r, sim.sign(JSON.stringify({ build: { id: 424242, number: 99, repo: { org: 'ghost', name: 'town' } }, item_version: 3 })));
    const res = await q.pop(background());
    expect(res.kind).toBe('item');
    const worker = new VelaClient({ address: sim.url, token: sim.secret });
    if (res.kind === 'item') expect(await claimBuild(background(), worker, res.item)).toMatchObject({ kind: 'unknown-build', error: { status: 404 } });

    const { build } = await sim.enqueueBuild({ org: 'octo', repo: `q-${randomUUID().slice(0, 6)}`, pipeline, route: r });
    build.status = 'canceled';
    const again = await q.pop(background());
    if (again.kind !== 'item') throw new Error(`expected an item, got ${again.kind}`);
    expect(await claimBuild(background(), worker, again.item)).toMatchObject({ kind: 'not-pending', error: { status: 409 } });
  });

  it('answers empty after the pop timeout', async () => {
    const q = newQueue(route(), 0.2);
    expect(await q.pop(background())).toEqual({ kind: 'empty' });
  });

  it('is woken by its ctx, and push back puts an item first in line', async () => {
    const r = route();
    const q = newQueue(r, 30);
    const [ctx, cancel] = withCancel(background());
    const started = Date.now();
    const p = q.pop(ctx);
    setTimeout(() => cancel(), 200);
    expect(await p).toEqual({ kind: 'canceled' });
    expect(Date.now() - started).toBeLessThan(10_000);

    await sim.enqueueBuild({ org: 'octo', repo: `q-${randomUUID().slice(0, 6)}`, pipeline, route: r });
    const second = await sim.enqueueBuild({ org: 'octo', repo: `q-${randomUUID().slice(0, 6)}`, pipeline, route: r });
    const first = await q.pop(background());
    if (first.kind !== 'item') throw new Error(`expected an item, got ${first.kind}`);
    await q.pushBack(first.entry);
    const again = await q.pop(background());
    expect(again).toMatchObject({ kind: 'item', item: { build: { id: first.item.build.id } } });
    expect(await q.pop(background())).toMatchObject({ kind: 'item', item: { build: { id: second.build.id } } });
    expect(await q.ping()).toBe(true);
  });

  it('three poppers sharing one route with 30 items pop each exactly once', async () => {
    const r = route();
    const poppers = [newQueue(r, 0.5), newQueue(r, 0.5), newQueue(r, 0.5)];
    const ids: number[] = [];
    const want: number[] = [];
    const [ctx, cancel] = withCancel(background());
    const loops = poppers.map(async (q) => {
      for (;;) {
        const res: PopResult = await q.pop(ctx);
        if (res.kind === 'item') ids.push(res.item.build.id);
        else if (res.kind === 'canceled') return;
        else if (res.kind !== 'empty') throw new Error(`unexpected ${res.kind}`);
      }
    });
    for (let i = 0; i < 30; i++) {
      const { build } = await sim.enqueueBuild({ org: 'octo', repo: `many-${i}`, pipeline, route: r });
      want.push(build.id!);
    }
    const deadline = Date.now() + 20_000;
    while (ids.length < 30 && Date.now() < deadline) await new Promise((res) => setTimeout(res, 50));
    cancel();
    await Promise.all(loops);
    expect(ids.length).toBe(30);
    expect(new Set(ids).size).toBe(30);
    expect([...ids].sort((a, b) => a - b)).toEqual([...want].sort((a, b) => a - b));
    expect(await sim.redis().llen(r)).toBe(0);
  });
});
