import { mkdtemp, readdir, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { background, isRuntimeError, type Runtime } from '@berth/runtime';
import { conformanceBuild, conformanceService, conformanceStep, runToCompletion, setupBuildResources, teardownBuild } from '@berth/runtime-conformance';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { hostRuntime, NO_ISOLATION_WARNING } from '../src/index.ts';
import { hostDirectory, mapWorkspacePath } from '../src/paths.ts';

let root: string;
let runtime: Runtime | undefined;
const warnings: string[] = [];

beforeEach(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'berth-host-test-'));
  warnings.length = 0;
});
afterEach(async () => {
  await runtime?.close();
  runtime = undefined;
  await rm(root, { recursive: true, force: true });
});

async function create(config: { workspaceHostPath?: string } = {}): Promise<Runtime> {
  runtime = await hostRuntime({ root, warn: (m) => warnings.push(m) }).create(background(), { workerId: 'host-test', ...config });
  return runtime;
}

describe('hostDirectory (workspacePath mapped onto the build workspace, as Woodpecker local.go execCommands runs in its workspace dir)', () => {
  it.each([
    ['', '/ws'],
    ['/vela', '/ws'],
    ['/vela/src/github.com/org/repo', '/ws/src/github.com/org/repo'],
  ])('%j → %s', (directory, expected) => {
    expect(hostDirectory(directory, '/vela', '/ws')).toBe(expected);
  });

  it('refuses a directory outside the workspace, or climbing out of it', () => {
    expect(hostDirectory('/etc', '/vela', '/ws')).toBeUndefined();
    expect(hostDirectory('/velanot', '/vela', '/ws')).toBeUndefined();
    expect(hostDirectory('/vela/../etc', '/vela', '/ws')).toBeUndefined();
    expect(mapWorkspacePath('/vela/x', '/vela/', '/ws')).toBe('/ws/x');
  });
});

describe('hostRuntime', () => {
  it('warns at create that it gives no isolation, and says so in the init log', async () => {
    const rt = await create();
    expect(warnings).toEqual([NO_ISOLATION_WARNING]);
    expect(NO_ISOLATION_WARNING).toMatch(/no isolation/);
    expect(await rt.inspectBuild(background(), conformanceBuild())).toContain(`WARNING: ${NO_ISOLATION_WARNING}`);
  });

  it('refuses a service, a user and a directory outside the workspace with InvalidConfig saying why', async () => {
    const rt = await create();
    const build = conformanceBuild();
    await setupBuildResources(background(), rt, build);
    const cases: [Parameters<typeof conformanceStep>[3] & object, RegExp][] = [
      [{ user: 'nobody-else' }, /asks for user "nobody-else"; the host runtime runs every step as the worker's user/],
      [{ directory: '/etc' }, /directory "\/etc" is outside the workspace \(\/vela\)/],
    ];
    for (const [fields, message] of cases) {
      const error = await rt
        .setupContainer(background(), conformanceStep(build, 'x', 1, { image: 'any', script: ['true'], ...fields }), build)
        .catch((e: unknown) => e);
      expect(isRuntimeError(error, 'InvalidConfig'), String(error)).toBe(true);
      expect((error as Error).message).toMatch(message);
    }
    const service = conformanceService(build, 'db', 1, { image: 'postgres', script: ['true'] });
    const error = await rt.setupContainer(background(), service, build).catch((e: unknown) => e);
    expect((error as Error).message).toMatch(/^\[host\] setupContainer service_.*_db: db is a service \(detached\); the host runtime does not run services/);
    await teardownBuild(background(), rt, build);
  });

  it("passes secrets only through the step's environment: the worker's own variables stay out, workspace paths are mapped", async () => {
    process.env.BERTH_HOST_TEST_WORKER_SECRET = 'worker-only';
    try {
      const rt = await create();
      const build = conformanceBuild();
      const step = conformanceStep(build, 'env', 1, {
        image: 'ignored',
        directory: '/vela/src',
        script: ['echo "secret=$API_TOKEN worker=${BERTH_HOST_TEST_WORKER_SECRET:-unset}"', 'echo "ws=$VELA_WORKSPACE pwd=$(pwd)"'],
        environment: { API_TOKEN: 's3cr3t', VELA_WORKSPACE: '/vela/src' },
      });
      build.steps = [step];
      await setupBuildResources(background(), rt, build);
      const result = await runToCompletion(rt, build, step);
      const workspace = path.join(root, 'host-test', build.id, 'workspace');
      expect(result.logs).toBe(`secret=s3cr3t worker=unset\nws=${workspace}/src pwd=${workspace}/src\n`);
      await teardownBuild(background(), rt, build);
      expect(await readdir(path.join(root, 'host-test'))).toEqual([]);
    } finally {
      delete process.env.BERTH_HOST_TEST_WORKER_SECRET;
    }
  });

  it('runs in workspaceHostPath when given, and leaves that directory in place', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'berth-host-ws-'));
    try {
      const rt = await create({ workspaceHostPath: dir });
      const build = conformanceBuild();
      const step = conformanceStep(build, 'write', 1, { image: 'ignored', directory: '/vela', script: ['echo kept > kept.txt', 'pwd'] });
      build.steps = [step];
      await setupBuildResources(background(), rt, build);
      expect((await runToCompletion(rt, build, step)).logs).toBe(`${dir}\n`);
      await teardownBuild(background(), rt, build);
      expect((await stat(path.join(dir, 'kept.txt'))).isFile()).toBe(true);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('leaves no directory of the worker once its builds are removed and it is closed, or reaped', async () => {
    const rt = await create();
    const build = conformanceBuild();
    const step = conformanceStep(build, 'one', 1, { image: 'ignored', script: ['true'] });
    build.steps = [step];
    await setupBuildResources(background(), rt, build);
    await runToCompletion(rt, build, step);
    await teardownBuild(background(), rt, build);
    await rt.close();
    runtime = undefined;
    expect(await readdir(root)).toEqual([]);

    const other = await create();
    const left = conformanceBuild();
    await setupBuildResources(background(), other, left);
    expect(await readdir(root)).toEqual(['host-test']);
    await other.reap(background(), 'host-test');
    expect(await readdir(root)).toEqual([]);
  });

  it('reports a program missing on the host as ContainerFailed naming it', async () => {
    const rt = await create();
    const build = conformanceBuild();
    const step = conformanceStep(build, 'missing', 1, { image: 'ignored', commands: ['berth-no-such-program', 'x'] });
    build.steps = [step];
    await setupBuildResources(background(), rt, build);
    const error = await rt.runContainer(background(), step, build).catch((e: unknown) => e);
    expect(isRuntimeError(error, 'ContainerFailed'), String(error)).toBe(true);
    expect((error as Error).message).toMatch(/cannot start missing: "berth-no-such-program" was not found on this host/);
    expect((await rt.waitContainer(background(), step)).exitCode).toBe(127);
    await teardownBuild(background(), rt, build);
  });
});
