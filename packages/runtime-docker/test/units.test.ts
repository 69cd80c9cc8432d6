import { Readable } from 'node:stream';
import { background, withCancel, withTimeout } from '@berth/context';
import { isRuntimeError, RuntimeError } from '@berth/runtime';
import type Docker from 'dockerode';
import { describe, expect, it } from 'vitest';
import { connect } from '../src/connection.ts';
import { toRuntimeError } from '../src/errors.ts';
import { pullImage, type PullProgress } from '../src/pull.ts';
import { parseVolumeAllowlist, resolveBindMounts } from '../src/volumes.ts';

const engine = { endpoint: 'unix:///var/run/docker.sock', source: 'DOCKER_HOST (unset)' };
const where = { operation: 'runContainer', subject: 'step_1' };
const httpError = (statusCode: number, message: string): Error =>
  Object.assign(new Error(`(HTTP code ${statusCode}) x - ${message} `), { statusCode, json: { message } });

describe('toRuntimeError', () => {
  it.each([
    [404, 'No such container: step_1', 'NotFound'],
    [404, 'No such image: berth/none:1', 'ImageNotFound'],
    [409, 'Conflict. The container name "/step_1" is already in use', 'AlreadyExists'],
    [400, 'invalid reference format', 'InvalidConfig'],
    [500, 'something broke', 'Internal'],
  ] as const)('maps HTTP %i (%s) to %s, keeping the engine message', (status, message, code) => {
    const error = toRuntimeError(httpError(status, message), background(), where, engine);
    expect(error).toBeInstanceOf(RuntimeError);
    expect(error.code).toBe(code);
    expect(error.message).toContain(message);
    expect(error.message).toMatch(/^\[docker\] runContainer step_1: /);
  });

  it.each(['ECONNREFUSED', 'ENOENT', 'EPIPE', 'ECONNRESET'])('maps socket error %s to Unavailable with what to do', (code) => {
    const error = toRuntimeError(Object.assign(new Error(`connect ${code} /var/run/docker.sock`), { code }), background(), where, engine);
    expect(error.code).toBe('Unavailable');
    expect(error.detail).toMatch(/Is dockerd running\? Check DOCKER_HOST/);
    expect(error.detail).toContain('unix:///var/run/docker.sock');
  });

  it('prefers the ctx: an aborted call is Canceled or DeadlineExceeded, whatever the socket said', async () => {
    const [canceled, cancel] = withCancel(background());
    cancel();
    expect(toRuntimeError(Object.assign(new Error('aborted'), { name: 'AbortError' }), canceled, where, engine).code).toBe('Canceled');
    const [expired, release] = withTimeout(background(), 1);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(toRuntimeError(Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' }), expired, where, engine).code).toBe('DeadlineExceeded');
    release();
  });
});

describe('volume allowlist', () => {
  const allowlist = parseVolumeAllowlist(['/srv/cache:/cache:rw', '/etc/ssl/certs', '/data:/mnt/data']);

  it('parses src[:dst[:ro|rw]], read-only unless rw', () => {
    expect(allowlist).toEqual([
      { source: '/srv/cache', destination: '/cache', writable: true },
      { source: '/etc/ssl/certs', destination: '/etc/ssl/certs', writable: false },
      { source: '/data', destination: '/mnt/data', writable: false },
    ]);
  });

  it.each(['relative:/x', '/a:/b:rwx', '/a::ro', '/a:/b:ro:extra'])('refuses the malformed entry %s', (entry) => {
    expect(() => parseVolumeAllowlist([entry])).toThrow(TypeError);
  });

  it('mounts allowlisted sources and paths below them, with the access the entry allows', () => {
    const { mounts, refused } = resolveBindMounts(
      [
        { source: '/srv/cache', destination: '/root/.cache', access_mode: '' },
        { source: '/srv/cache/go', destination: '/go', access_mode: 'ro' },
        { source: '/data', destination: '', access_mode: 'rw' },
      ],
      allowlist,
    );
    expect(refused).toEqual([]);
    expect(mounts).toEqual([
      { Type: 'bind', Source: '/srv/cache', Target: '/root/.cache', ReadOnly: false },
      { Type: 'bind', Source: '/srv/cache/go', Target: '/go', ReadOnly: true },
      { Type: 'bind', Source: '/data', Target: '/mnt/data', ReadOnly: true },
    ]);
  });

  it('refuses sources outside the allowlist, including escapes with .. and look-alike prefixes', () => {
    const requested = [
      { source: '/etc/passwd', destination: '/x', access_mode: '' },
      { source: '/srv/cache/../../etc', destination: '/x', access_mode: '' },
      { source: '/srv/cache-other', destination: '/x', access_mode: '' },
      { source: 'relative', destination: '/x', access_mode: '' },
    ];
    const { mounts, refused } = resolveBindMounts(requested, allowlist);
    expect(mounts).toEqual([]);
    expect(refused).toEqual(requested);
  });
});

describe('connect', () => {
  it('honours DOCKER_HOST when no option is given, and names it in messages', () => {
    const viaEnv = connect({}, { DOCKER_HOST: 'tcp://10.0.0.1:2375' });
    expect(viaEnv.engine.source).toBe('DOCKER_HOST=tcp://10.0.0.1:2375');
    expect(viaEnv.docker.modem).toMatchObject({ host: '10.0.0.1', port: '2375', protocol: 'http' });
    viaEnv.close();
    const unix = connect({}, { DOCKER_HOST: 'unix:///run/other.sock' });
    expect(unix.docker.modem).toMatchObject({ socketPath: '/run/other.sock' });
    unix.close();
  });

  it('lets options win over DOCKER_HOST, and defaults to /var/run/docker.sock', () => {
    const option = connect({ socketPath: '/tmp/x.sock' }, { DOCKER_HOST: 'tcp://10.0.0.1:2375' });
    expect(option.docker.modem).toMatchObject({ socketPath: '/tmp/x.sock' });
    option.close();
    const fallback = connect({}, {});
    expect(fallback.docker.modem).toMatchObject({ socketPath: '/var/run/docker.sock' });
    expect(fallback.engine.source).toMatch(/DOCKER_HOST \(unset/);
    fallback.close();
  });

  it('refuses an address it cannot use', () => {
    expect(() => connect({ host: 'ftp://x' })).toThrow(TypeError);
  });
});

describe('pullImage', () => {
  const image = { repository: 'docker.io/library/alpine', tagOrDigest: '3.20', reference: 'docker.io/library/alpine:3.20' };
  /** A stand-in for dockerode whose pull answers with `lines` (or fails with `error`). */
  const fakeDocker = (lines: string[], error?: Error): Docker =>
    ({
      createImage: (opts: { fromImage: string; tag: string }) => {
        expect(opts).toMatchObject({ fromImage: image.repository, tag: image.tagOrDigest });
        return error ? Promise.reject(error) : Promise.resolve(Readable.from(lines.map((line) => Buffer.from(line))));
      },
    }) as unknown as Docker;

  it('reports progress and resolves at the end of the stream', async () => {
    const progress: PullProgress[] = [];
    const lines = [
      '{"status":"Pulling from library/alpine","id":"3.20"}\n',
      '{"status":"Downloading","id":"abc","progressDetail":{"current":5,"total":10}}\r\n',
      'not json\n',
      '{"status":"Status: Downloaded newer image"}',
    ];
    await pullImage(background(), fakeDocker(lines), engine, where, image, (p) => progress.push(p));
    expect(progress).toEqual([
      { status: 'Pulling from library/alpine', id: '3.20' },
      { status: 'Downloading', id: 'abc', current: 5, total: 10 },
      { status: 'Status: Downloaded newer image' },
    ]);
  });

  it('turns an error inside the progress stream (HTTP 200) into ImagePullFailed with the message', async () => {
    const lines = [
      '{"status":"Pulling fs layer","id":"abc"}\n',
      '{"errorDetail":{"message":"unauthorized: authentication required"},"error":"unauthorized: authentication required"}\n',
    ];
    const error = await pullImage(background(), fakeDocker(lines), engine, where, image, () => undefined).catch((e: unknown) => e);
    expect(isRuntimeError(error, 'ImagePullFailed')).toBe(true);
    expect((error as RuntimeError).detail).toBe('pulling image "docker.io/library/alpine:3.20" failed: unauthorized: authentication required');
  });

  it('reports a registry without the image as ImageNotFound', async () => {
    const lines = ['{"error":"manifest for alpine:3.20 not found: manifest unknown: manifest unknown"}\n'];
    await expect(pullImage(background(), fakeDocker(lines), engine, where, image, () => undefined)).rejects.toMatchObject({ code: 'ImageNotFound' });
  });

  it('reports an HTTP refusal of the pull as ImagePullFailed, and a bad reference as InvalidConfig', async () => {
    await expect(
      pullImage(background(), fakeDocker([], httpError(500, 'Get "http://127.0.0.1:1/v2/": connection refused')), engine, where, image, () => undefined),
    ).rejects.toMatchObject({
      code: 'ImagePullFailed',
      detail: expect.stringContaining('connection refused') as unknown,
    });
    await expect(
      pullImage(background(), fakeDocker([], httpError(400, 'invalid reference format')), engine, where, image, () => undefined),
    ).rejects.toMatchObject({ code: 'InvalidConfig' });
  });

  it('rejects Canceled at once when ctx is cancelled mid-pull, destroying the stream', async () => {
    const [ctx, cancel] = withCancel(background());
    const stream = new Readable({ read() {} });
    const docker = { createImage: () => Promise.resolve(stream) } as unknown as Docker;
    const pulling = pullImage(ctx, docker, engine, where, image, () => undefined);
    stream.push('{"status":"Downloading"}\n');
    setTimeout(() => cancel(), 20);
    await expect(pulling).rejects.toMatchObject({ code: 'Canceled' });
    expect(stream.destroyed).toBe(true);
  });
});
