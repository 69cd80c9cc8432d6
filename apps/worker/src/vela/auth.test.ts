import { randomUUID } from 'node:crypto';
import { Canceled, background, withCancel } from '@berth/context';
import { VelaSim, mintJwt } from '@berth/vela-sim';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WorkerCredentials, checkIn, checkRegistrationToken, decodeJwt, isTokenExpired, nextCheckInDelayMs } from './auth.ts';
import { VelaClient } from './client.ts';

let sim: VelaSim;
beforeAll(async () => {
  sim = await VelaSim.start({ workerAuthTokenTtlSec: 20 * 60 });
});
afterAll(async () => {
  await sim.close();
});

const NOW = 1_700_000_000_000;
const jwt = (claims: Record<string, unknown>): string =>
  mintJwt('k', { sub: 'w1', token_type: 'WorkerRegister', iat: NOW / 1000, exp: NOW / 1000 + 60, ...claims });

describe('tokens', () => {
  it('decodes claims without verifying, and counts a token expired 10 s early', () => {
    expect(decodeJwt(jwt({}))).toMatchObject({ sub: 'w1', token_type: 'WorkerRegister' });
    expect(decodeJwt('the-shared-secret')).toBeUndefined();
    expect(isTokenExpired(jwt({ exp: NOW / 1000 + 11 }), NOW)).toBe(false);
    expect(isTokenExpired(jwt({ exp: NOW / 1000 + 9 }), NOW)).toBe(true);
    expect(isTokenExpired('the-shared-secret', NOW)).toBe(false);
  });

  it('checks in early when the token would expire before the next check-in', () => {
    expect(nextCheckInDelayMs(jwt({ exp: NOW / 1000 + 20 * 60 }), 15 * 60_000, NOW)).toBe(15 * 60_000);
    expect(nextCheckInDelayMs(jwt({ exp: NOW / 1000 + 10 * 60 }), 15 * 60_000, NOW)).toBe(9 * 60_000);
    expect(nextCheckInDelayMs('secret', 15 * 60_000, NOW)).toBe(15 * 60_000);
  });

  it.each([
    ['no header', undefined, 401, {}],
    ['not bearer', 'Basic abc', 401, {}],
    ['not a JWT', 'Bearer nope', 401, {}],
    ['no subject', `Bearer ${jwt({ sub: '' })}`, 401, {}],
    ['another host', `Bearer ${jwt({ sub: 'w2' })}`, 401, 'worker hostname is invalid'],
    ['an auth token', `Bearer ${jwt({ token_type: 'WorkerAuth' })}`, 401, 'token is not a registration token'],
    ['expired', `Bearer ${jwt({ exp: NOW / 1000 - 1 })}`, 401, 'registration token is expired'],
  ])('refuses a registration with %s', (_name, header, status, body) => {
    const check = checkRegistrationToken(header, 'w1', NOW);
    expect(check.ok).toBe(false);
    if (!check.ok) expect(check.response).toEqual({ status, body });
  });

  it('accepts a registration token for this host', () => {
    expect(checkRegistrationToken(`Bearer ${jwt({})}`, 'w1', NOW)).toMatchObject({ ok: true, claims: { sub: 'w1' } });
  });
});

describe('WorkerCredentials', () => {
  it('uses the secret when configured', async () => {
    const creds = new WorkerCredentials({ hostname: 'w1', secret: 's3cret' });
    expect(creds.needsRegistration()).toBe(false);
    expect(await creds.registrationToken(background())).toBe('s3cret');
  });

  it('waits for a token on /register; a second one is told the worker is already registered', async () => {
    const creds = new WorkerCredentials({ hostname: 'w1' });
    const token = sim.registrationToken('w1');
    const waiting = creds.registrationToken(background());
    expect(creds.offerRegistration(`Bearer ${token}`)).toEqual({ status: 200, body: 'successfully passed token to worker' });
    expect(await waiting).toBe(token);
    // Nobody waits now: the next one is kept, and a third is refused as already registered.
    expect(creds.offerRegistration(`Bearer ${sim.registrationToken('w1')}`).body).toBe('successfully passed token to worker');
    expect(creds.offerRegistration(`Bearer ${sim.registrationToken('w1')}`).body).toBe('worker already registered');
  });

  it('stops waiting when its ctx ends', async () => {
    const creds = new WorkerCredentials({ hostname: 'w1' });
    const [ctx, cancel] = withCancel(background());
    const p = creds.registrationToken(ctx);
    cancel();
    await expect(p).rejects.toBeInstanceOf(Canceled);
  });
});

describe('checkIn', () => {
  it('registers with a registration token, then refreshes into new auth tokens', async () => {
    const host = `w-${randomUUID().slice(0, 8)}`;
    const creds = new WorkerCredentials({ hostname: host });
    creds.offerRegistration(`Bearer ${sim.registrationToken(host)}`);
    const client = new VelaClient({ address: sim.url, token: await creds.registrationToken(background()) });
    const info = await client.queueInfo(background());
    expect(info.queue_public_key).toBe(sim.queueKeys.publicKeyBase64);

    const record = { hostname: host, address: `http://${host}:8080`, routes: ['vela'], active: true, status: 'idle', build_limit: 2 };
    const first = await checkIn(background(), client, record);
    expect(first.registered).toBe(true);
    expect(decodeJwt(first.token)).toMatchObject({ sub: host, token_type: 'WorkerAuth' });
    creds.setToken(first.token);
    expect(creds.needsRegistration()).toBe(false);

    const second = await checkIn(background(), client.withToken(first.token), { ...record, status: 'busy' });
    expect(second.registered).toBe(false);
    expect(second.worker).toMatchObject({ hostname: host, status: 'busy', build_limit: 2 });
    const calls = sim.calls.filter((c) => c.path.includes(host)).map((c) => `${c.method} ${c.path.replace(host, 'H')} ${c.status} ${c.tokenType}`);
    expect(calls).toEqual([
      'GET /api/v1/workers/H 404 WorkerRegister',
      'PUT /api/v1/workers/H 200 WorkerRegister',
      'GET /api/v1/workers/H 200 WorkerAuth',
      'POST /api/v1/workers/H/refresh 200 WorkerAuth',
      'PUT /api/v1/workers/H 200 WorkerAuth',
    ]);
  });

  it('with the shared secret, the server answers the secret itself', async () => {
    const host = `w-${randomUUID().slice(0, 8)}`;
    const client = new VelaClient({ address: sim.url, token: sim.secret });
    const res = await checkIn(background(), client, { hostname: host, address: `http://${host}` });
    expect(res.token).toBe(sim.secret);
  });
});
