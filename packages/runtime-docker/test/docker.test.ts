import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { background, type Context, withCancel, withTimeout } from '@berth/context';
import { expectNoAsyncLeaks, listenerCount } from '@berth/context/testing';
import { emptyBuild } from '@berth/pipeline';
import { isRuntimeError, LABELS, type Runtime, type RuntimeConfig, type RuntimeError, type RuntimeEvent } from '@berth/runtime';
import { beforeAll, describe, expect, it } from 'vitest';
import { dockerRuntime, type DockerRuntimeOptions } from '../src/index.ts';
import { engine, PAUSE, readAll, rejection, runToEnd, shellStep, step, suffix, useEngine } from './fixture.ts';
import { EngineProxy } from './proxy.ts';

const ctx = background();
const docker = engine();
const events: RuntimeEvent[] = [];
const fx = useEngine('docker', { config: { onEvent: (e) => events.push(e) } });
const { run, workerId } = fx;
const hostRo = mkdtempSync(path.join(os.tmpdir(), 'berth-rd-ro-'));
const hostRw = mkdtempSync(path.join(os.tmpdir(), 'berth-rd-rw-'));
writeFileSync(path.join(hostRo, 'hello.txt'), 'from the host\n');
chmodSync(hostRw, 0o777);
fx.onCleanup(() => {
  rmSync(hostRo, { recursive: true, force: true });
  rmSync(hostRw, { recursive: true, force: true });
});

let runtime: Runtime;

beforeAll(async () => {
  runtime = await fx.newRuntime(
    { privilegedImages: ['berth/busybox'], volumes: [`${hostRo}:/host`, `${hostRw}:/scratch:rw`] },
    { cpus: 0.5, memoryBytes: 64 * 1024 * 1024, dropCapabilities: ['NET_RAW', 'MKNOD'], pidsLimit: 128 },
  );
});

describe('containers', () => {
  it('applies limits, labels, the network alias, the workspace and the process settings', async () => {
    const build = await fx.newBuild(runtime);
    const container = shellStep(build, 'limits', 'ulimit -n; id -u; pwd; echo "$GREETING"', {
      environment: { GREETING: 'hello $NOT_EXPANDED' },
      directory: '/vela/src',
      user: '1234:1234',
      ulimits: [{ name: 'nofile', soft: 1024, hard: 2048 }],
    });
    await runtime.setupContainer(ctx, container, build);
    const info = await docker.getContainer(container.id).inspect();
    const host = info.HostConfig;
    expect(host.Memory).toBe(64 * 1024 * 1024);
    expect(host.NanoCpus).toBe(500_000_000);
    expect(host.CapDrop).toEqual(['NET_RAW', 'MKNOD']);
    expect(host.PidsLimit).toBe(128);
    expect(host.Ulimits).toEqual([{ Name: 'nofile', Soft: 1024, Hard: 2048 }]);
    expect(host.Privileged).toBe(false);
    expect(host.NetworkMode).toBe(build.id);
    expect(info.Mounts).toEqual([expect.objectContaining({ Type: 'volume', Name: build.id, Destination: '/vela' })]);
    expect(info.Config.Labels).toMatchObject({ [LABELS.worker]: workerId, [LABELS.build]: build.id, [LABELS.container]: container.id });
    expect(info.Config.Entrypoint).toEqual(['/bin/sh', '-c']);
    expect(info.Config.WorkingDir).toBe('/vela/src');
    expect(info.Config.User).toBe('1234:1234');
    expect(info.Config.Env).toContain('GREETING=hello $NOT_EXPANDED');
    expect(info.NetworkSettings.Networks[build.id]?.Aliases).toContain('limits');

    const network = await docker.getNetwork(build.id).inspect();
    expect(network.Driver).toBe('bridge');
    expect(network.Labels).toMatchObject({ [LABELS.worker]: workerId, [LABELS.build]: build.id });
    const volume = await docker.getVolume(build.id).inspect();
    expect(volume.Labels).toMatchObject({ [LABELS.worker]: workerId, [LABELS.build]: build.id });

    await runtime.runContainer(ctx, container, build);
    const logs = readAll(await runtime.tailContainer(ctx, container));
    expect(await runtime.waitContainer(ctx, container)).toEqual({ exitCode: 0, reason: 'Completed' });
    expect(await logs).toBe('1024\n1234\n/vela/src\nhello $NOT_EXPANDED\n');
    await runtime.removeBuild(ctx, build);
  });

  it('streams a log through dockerode when a proxy in front of the engine refuses HTTP/1.0 (src/engine-stream.ts)', async () => {
    const proxy = new EngineProxy(undefined, { refuseHttp10: true });
    await proxy.open();
    try {
      const viaProxy = await fx.newRuntime({}, { socketPath: proxy.path });
      const build = await fx.newBuild(viaProxy);
      const container = shellStep(build, 'proxied', 'echo out; echo err >&2; echo end');
      const { exitCode, logs } = await runToEnd(viaProxy, build, container);
      expect(exitCode).toBe(0);
      // stdout and stderr are two pipes: the engine may log them in either order.
      expect(logs.split('\n').sort()).toEqual(['', 'end', 'err', 'out']);
      expect(proxy.refused).toBeGreaterThan(0);
      await viaProxy.removeBuild(ctx, build);
    } finally {
      await proxy.dispose();
    }
  });

  it('reports a container whose entrypoint does not exist as ContainerFailed, with the engine message', async () => {
    const build = await fx.newBuild(runtime);
    const container = step(build, 'noexec', { entrypoint: ['/no/such/binary'] });
    await runtime.setupContainer(ctx, container, build);
    const error = await rejection(runtime.runContainer(ctx, container, build));
    expect(error.code).toBe('ContainerFailed');
    expect(error.detail).toMatch(/could not be started: .*no such file or directory/);
    await runtime.removeBuild(ctx, build);
  });

  it('reports a second container or network of the same name as AlreadyExists', async () => {
    const build = await fx.newBuild(runtime);
    expect((await rejection(runtime.createNetwork(ctx, build))).code).toBe('AlreadyExists');
    const container = step(build, 'twice');
    await runtime.setupContainer(ctx, container, build);
    expect((await rejection(runtime.setupContainer(ctx, container, build))).code).toBe('AlreadyExists');
    await runtime.removeBuild(ctx, build);
  });

  it('refuses an unknown ulimit with InvalidConfig before touching the engine', async () => {
    const build = emptyBuild({ id: fx.buildId('ulimit') });
    const error = await rejection(runtime.setupContainer(ctx, step(build, 'bad', { ulimits: [{ name: 'nofiles', soft: 1, hard: 1 }] }), build));
    expect(error.code).toBe('InvalidConfig');
    expect(error.detail).toMatch(/ulimit "nofiles" is unknown/);
  });

  it('stops with SIGTERM, waits the grace, then SIGKILLs', async () => {
    const build = await fx.newBuild(runtime);
    const polite = step(build, 'polite', { image: PAUSE });
    const stubborn = shellStep(build, 'stubborn', "trap '' TERM; echo ready; while true; do sleep 1; done");
    for (const c of [polite, stubborn]) {
      await runtime.setupContainer(ctx, c, build);
      await runtime.runContainer(ctx, c, build);
    }
    const politeExit = runtime.waitContainer(ctx, polite);
    const stubbornExit = runtime.waitContainer(ctx, stubborn);
    await runtime.removeContainer(ctx, polite);
    expect((await politeExit).exitCode).toBe(0); // it exits 0 on SIGTERM: it was not killed

    const started = Date.now();
    await runtime.removeContainer(ctx, stubborn);
    expect(Date.now() - started).toBeGreaterThanOrEqual(900); // the 1 s grace was honoured
    expect((await stubbornExit).exitCode).toBe(137);
    await expect(docker.getContainer(stubborn.id).inspect()).rejects.toMatchObject({ statusCode: 404 });
    await runtime.removeContainer(ctx, stubborn); // idempotent
    await runtime.removeBuild(ctx, build);
  });
});

describe('resources', () => {
  it('leaves no socket, timer or abort listener behind after a build, including cancelled waits and tails', async () => {
    const [buildCtx, cancelBuild] = withCancel(background());
    await expectNoAsyncLeaks(
      async () => {
        const r = await dockerRuntime({ stopGraceMs: 1_000 }).create(buildCtx, { workerId });
        const build = emptyBuild({ id: fx.buildId('leaks') });
        await r.createNetwork(buildCtx, build);
        await r.createVolume(buildCtx, build);
        const quick = shellStep(build, 'quick', 'echo done');
        const slow = step(build, 'slow', { image: PAUSE });
        for (const c of [quick, slow]) {
          await r.setupContainer(buildCtx, c, build);
          await r.runContainer(buildCtx, c, build);
        }
        expect(await readAll(await r.tailContainer(buildCtx, quick))).toBe('done\n');
        expect((await r.waitContainer(buildCtx, quick)).exitCode).toBe(0);
        const [waitCtx, cancelWait] = withCancel(buildCtx);
        const waiting = r.waitContainer(waitCtx, slow);
        const tail = await r.tailContainer(waitCtx, slow);
        tail.on('error', () => undefined);
        tail.resume();
        const tailClosed = new Promise((resolve) => tail.once('close', resolve));
        cancelWait();
        expect((await rejection(waiting)).code).toBe('Canceled');
        await tailClosed;
        await r.removeContainer(buildCtx, quick);
        await r.removeContainer(buildCtx, slow);
        await r.removeVolume(buildCtx, build);
        await r.removeNetwork(buildCtx, build);
        await r.removeBuild(buildCtx, build);
        await r.close();
      },
      { settleMs: 500 },
    );
    expect(listenerCount(buildCtx.signal)).toBe(0);
    cancelBuild();
  }, 120_000);
});

describe('privileged', () => {
  // This engine may not be able to *start* privileged containers (some sandboxes): create and inspect.
  it.each([
    ['berth/busybox', true, true],
    ['berth/*', true, true],
    ['berth/busybox:1.35', true, true],
    ['berth/busybox:9', true, false],
    ['busybox', true, false],
    ['berth/busybox', false, false],
  ] as const)('with allowlist [%s], a step asking %s runs privileged: %s', async (pattern, asks, expected) => {
    const r = await fx.newRuntime({ privilegedImages: [pattern] });
    const build = emptyBuild({ id: fx.buildId(`priv_${suffix()}`) });
    const container = step(build, 'priv', { privileged: asks });
    const before = events.length;
    await r.setupContainer(ctx, container, build);
    const info = await docker.getContainer(container.id).inspect();
    expect(info.HostConfig.Privileged).toBe(expected);
    const notices = events.slice(before).filter((e) => e.type === 'notice' && e.reason === 'NotPrivileged');
    expect(notices.length).toBe(asks && !expected ? 1 : 0);
    await r.removeBuild(ctx, build);
  });
});

describe('bind mounts', () => {
  it('mounts allowlisted host paths read-only unless the allowlist says rw', async () => {
    const build = await fx.newBuild(runtime);
    const container = shellStep(
      build,
      'mounts',
      'cat /host/hello.txt; touch /host/nope 2>/dev/null && echo wrote-ro || echo ro-refused; echo from-step > /scratch/out.txt && echo wrote-rw',
      {
        volumes: [
          { source: hostRo, destination: '/host', access_mode: '' },
          { source: hostRw, destination: '/scratch', access_mode: 'rw' },
        ],
      },
    );
    const result = await runToEnd(runtime, build, container);
    expect(result).toEqual({ exitCode: 0, logs: 'from the host\nro-refused\nwrote-rw\n' });
    expect(readFileSync(path.join(hostRw, 'out.txt'), 'utf8')).toBe('from-step\n');
    expect(existsSync(path.join(hostRo, 'nope'))).toBe(false);
    await runtime.removeBuild(ctx, build);
  });

  it('refuses a host path outside the allowlist with InvalidConfig (Vela ignores it silently)', async () => {
    const build = emptyBuild({ id: fx.buildId('mount') });
    const container = step(build, 'escape', { volumes: [{ source: '/etc', destination: '/host-etc', access_mode: 'ro' }] });
    const error = await rejection(runtime.setupContainer(ctx, container, build));
    expect(error.code).toBe('InvalidConfig');
    expect(error.detail).toMatch(/\/etc:\/host-etc:ro is not allowed on this worker.*VELA_RUNTIME_VOLUMES/);
  });
});

describe('a host directory as the workspace (berth exec)', () => {
  it('mounts workspaceHostPath at the workspace path instead of the build volume', async () => {
    const workdir = mkdtempSync(path.join(os.tmpdir(), 'berth-rd-ws-'));
    chmodSync(workdir, 0o777);
    writeFileSync(path.join(workdir, 'input.txt'), 'from the checkout\n');
    const local = await fx.newRuntime({ workspacePath: '/vela/src', workspaceHostPath: workdir });
    const build = await fx.newBuild(local);
    const container = shellStep(build, 'ws', 'cat /vela/src/input.txt && echo built > /vela/src/output.txt', { directory: '/vela/src' });
    const result = await runToEnd(local, build, container);
    expect(result).toEqual({ exitCode: 0, logs: 'from the checkout\n' });
    expect(readFileSync(path.join(workdir, 'output.txt'), 'utf8')).toBe('built\n');
    await local.removeBuild(ctx, build);
    rmSync(workdir, { recursive: true, force: true });
  });

  it('refuses a relative or missing workspace host directory with InvalidConfig at create', async () => {
    const relative = await rejection(dockerRuntime().create(ctx, { workerId, workspaceHostPath: 'relative/dir' }));
    expect(relative.code).toBe('InvalidConfig');
    expect(relative.detail).toMatch(/absolute path/);
    const missing = await rejection(dockerRuntime().create(ctx, { workerId, workspaceHostPath: '/no/such/berth/dir' }));
    expect(missing.code).toBe('InvalidConfig');
    expect(missing.detail).toMatch(/does not exist/);
  });
});

describe('images', () => {
  // 127.0.0.1:1 refuses connections: the engine's pull fails at once, and nothing is downloaded.
  const unreachable = `127.0.0.1:1/berth/missing-${run}:1`;

  it('does not pull a present image with not_present', async () => {
    const build = await fx.newBuild(runtime);
    const before = events.length;
    expect((await runToEnd(runtime, build, step(build, 'present', { pull: 'not_present', commands: ['true'] }))).exitCode).toBe(0);
    expect(events.slice(before).some((e) => e.type === 'pull' || (e.type === 'notice' && e.reason === 'Pulling'))).toBe(false);
    await runtime.removeBuild(ctx, build);
  });

  it.each(['always', 'not_present'] as const)('reports a failed pull (%s) as ImagePullFailed, promptly, with the reason', async (pull) => {
    const build = emptyBuild({ id: fx.buildId(`pull_${pull}`) });
    const started = Date.now();
    const error = await rejection(runtime.setupContainer(ctx, step(build, 'pull', { image: unreachable, pull }), build));
    expect(Date.now() - started).toBeLessThan(15_000);
    expect(error.code).toBe('ImagePullFailed');
    expect(error.detail).toContain(`pulling image "${unreachable}" failed`);
    expect(error.detail).toMatch(/connection refused/);
    expect(events).toContainEqual(expect.objectContaining({ type: 'notice', reason: 'Pulling', buildId: build.id, containerId: `step_${build.id}_pull` }));
  });

  it('reports a missing image with never as ImageNotFound without pulling', async () => {
    const build = emptyBuild({ id: fx.buildId('never') });
    const error = await rejection(runtime.setupContainer(ctx, step(build, 'never', { image: unreachable, pull: 'never' }), build));
    expect(error.code).toBe('ImageNotFound');
    expect(error.detail).toMatch(/not found locally and pull policy is "never"/);
  });

  it('pulls on_start images in runContainer, not in setupContainer', async () => {
    const build = await fx.newBuild(runtime);
    const container = step(build, 'onstart', { image: unreachable, pull: 'on_start' });
    await runtime.setupContainer(ctx, container, build);
    const error = await rejection(runtime.runContainer(ctx, container, build));
    expect(error.code).toBe('ImagePullFailed');
    expect(error.operation).toBe('runContainer');
    await runtime.removeBuild(ctx, build);
  });

  it('gives up a hanging pull when ctx ends, with DeadlineExceeded', async () => {
    // A "registry" that accepts connections and never answers.
    const sockets = new Set<net.Socket>();
    const registry = net.createServer((socket) => {
      sockets.add(socket);
      socket.on('error', () => undefined);
    });
    await new Promise<void>((resolve) => registry.listen(0, '127.0.0.1', resolve));
    const port = (registry.address() as net.AddressInfo).port;
    try {
      const [short, release] = withTimeout(ctx, 1_000);
      const started = Date.now();
      const error = await rejection(runtime.createImage(short, step(emptyBuild({ id: 'x' }), 'hang', { image: `127.0.0.1:${port}/berth/hang:1` })));
      release();
      expect(error.code).toBe('DeadlineExceeded');
      expect(Date.now() - started).toBeLessThan(3_000);
    } finally {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => registry.close(resolve));
    }
  });

  it('reports an invalid reference as InvalidConfig', async () => {
    const build = emptyBuild({ id: fx.buildId('invalid') });
    const error = await rejection(runtime.setupContainer(ctx, step(build, 'bad', { image: 'Not/A::Reference' }), build));
    expect(error.code).toBe('InvalidConfig');
  });
});

describe('reap', () => {
  it("removes a worker's containers, networks and volumes except the kept builds, and nothing of other workers", async () => {
    const owner = `rd-reap-${run}`;
    const other = `rd-other-${run}`;
    const mine = await fx.newRuntime({ workerId: owner });
    const theirs = await fx.newRuntime({ workerId: other });
    const kept = await fx.newBuild(mine);
    const crashed = await fx.newBuild(mine);
    const foreign = await fx.newBuild(theirs);
    for (const [r, b] of [
      [mine, kept],
      [mine, crashed],
      [theirs, foreign],
    ] as const) {
      const c = step(b, 'svc', { image: PAUSE });
      await r.setupContainer(ctx, c, b);
      await r.runContainer(ctx, c, b);
    }
    const report = await mine.reap(ctx, owner, new Set([kept.id]));
    expect(report).toEqual({ containers: [`step_${crashed.id}_svc`], networks: [crashed.id], volumes: [crashed.id], pods: [] });
    await expect(docker.getNetwork(crashed.id).inspect()).rejects.toMatchObject({ statusCode: 404 });
    await expect(docker.getVolume(crashed.id).inspect()).rejects.toMatchObject({ statusCode: 404 });
    expect((await docker.getContainer(`step_${kept.id}_svc`).inspect()).State.Running).toBe(true);
    expect((await docker.getContainer(`step_${foreign.id}_svc`).inspect()).State.Running).toBe(true);

    const rest = await mine.reap(ctx, owner);
    expect(rest.containers).toEqual([`step_${kept.id}_svc`]);
    expect(await mine.reap(ctx, owner)).toEqual({ containers: [], networks: [], volumes: [], pods: [] });
    await theirs.reap(ctx, other);
    await expect(docker.getNetwork(foreign.id).inspect()).rejects.toMatchObject({ statusCode: 404 });
  });
});

describe('an unreachable engine', () => {
  async function unavailable(create: () => Promise<Runtime>): Promise<RuntimeError> {
    const started = Date.now();
    const error = await rejection(create());
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(error.code).toBe('Unavailable');
    expect(error.detail).toMatch(/Is dockerd running\?/);
    return error;
  }

  it('is reported as Unavailable, naming the socket, when the socket does not exist', async () => {
    const error = await unavailable(() => dockerRuntime({ socketPath: '/nonexistent/docker.sock' }).create(ctx, { workerId }));
    expect(error.detail).toContain('cannot reach the Docker engine at unix:///nonexistent/docker.sock (ENOENT');
    expect(error.detail).toContain("the runtime's socketPath option");
  });

  it('is reported as Unavailable when nothing listens on a tcp host', async () => {
    const error = await unavailable(() => dockerRuntime({ host: 'tcp://127.0.0.1:1' }).create(ctx, { workerId }));
    expect(error.detail).toContain('ECONNREFUSED');
  });

  it('honours DOCKER_HOST and names it', async () => {
    const saved = process.env.DOCKER_HOST;
    process.env.DOCKER_HOST = 'unix:///nonexistent/from-env.sock';
    try {
      const error = await unavailable(() => dockerRuntime().create(ctx, { workerId }));
      expect(error.detail).toContain('Check DOCKER_HOST=unix:///nonexistent/from-env.sock');
    } finally {
      if (saved === undefined) delete process.env.DOCKER_HOST;
      else process.env.DOCKER_HOST = saved;
    }
  });

  it('refuses a bad configuration with InvalidConfig', async () => {
    const bad = async (config: Partial<RuntimeConfig>, options: DockerRuntimeOptions = {}): Promise<void> => {
      const error = await rejection(dockerRuntime(options).create(ctx, { workerId, ...config }));
      expect(isRuntimeError(error, 'InvalidConfig')).toBe(true);
    };
    await bad({ volumes: ['relative:/x'] });
    await bad({ workerId: '' });
    await bad({}, { cpus: -1 });
    await bad({}, { host: 'ftp://nowhere' });
  });
});

export type { Context };
