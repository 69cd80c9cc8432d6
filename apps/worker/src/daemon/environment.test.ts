import { emptyContainer } from '@berth/pipeline';
import { describe, expect, it } from 'vitest';
import { runEnvironment } from './environment.ts';

describe('runEnvironment (Vela step.Environment)', () => {
  const build = {
    id: 7,
    number: 12,
    event: 'pull_request',
    event_action: 'opened',
    status: 'pending',
    branch: 'main',
    repo: {
      org: 'octo',
      name: 'app',
      full_name: 'octo/app',
      owner: { name: 'octocat' },
      allow_events: { push: { branch: true, tag: true }, pull_request: { opened: true, synchronize: true }, deployment: { created: false } },
    },
  };

  it('lays the build as it runs on this worker over the compiled values, with the repo', () => {
    const env = runEnvironment(build, { host: 'worker-1', runtime: 'kubernetes', started: 1_700_000_000 })(emptyContainer({ name: 's', image: 'i' }));
    expect(env).toMatchObject({
      VELA_BUILD_EVENT: 'pull_request',
      VELA_BUILD_EVENT_ACTION: 'opened',
      VELA_BUILD_STATUS: 'running',
      VELA_BUILD_HOST: 'worker-1',
      VELA_BUILD_RUNTIME: 'kubernetes',
      VELA_BUILD_DISTRIBUTION: 'linux',
      VELA_BUILD_STARTED: '1700000000',
      VELA_BUILD_NUMBER: '12',
      VELA_REPO_FULL_NAME: 'octo/app',
      VELA_REPO_OWNER: 'octocat',
      // Vela's Events.List order.
      VELA_REPO_ALLOW_EVENTS: 'push,pull_request:opened,pull_request:synchronize,tag',
    });
  });

  it("uses the container's workspace", () => {
    const env = runEnvironment(build, { host: 'w', runtime: 'docker', started: 1 })(
      emptyContainer({ name: 's', image: 'i', environment: { VELA_WORKSPACE: '/vela/src/github.com/octo/app' } }),
    );
    expect(env['VELA_BUILD_WORKSPACE']).toBe('/vela/src/github.com/octo/app');
  });

  // W executor/linux/build.go CreateBuild: c.build is the server's answer to the running PUT.
  it('reads the build for each container: the enqueued time the server stored after the push', () => {
    let current: typeof build & { enqueued?: number } = build;
    const env = runEnvironment(() => current, { host: 'w', runtime: 'docker', started: 1 });
    expect(env(emptyContainer({ name: 's', image: 'i' }))['VELA_BUILD_ENQUEUED']).toBe('0');
    current = { ...build, enqueued: 1_700_000_100 };
    const after = env(emptyContainer({ name: 's', image: 'i' }));
    expect([after['VELA_BUILD_ENQUEUED'], after['BUILD_ENQUEUED']]).toEqual(['1700000100', '1700000100']);
  });
});
