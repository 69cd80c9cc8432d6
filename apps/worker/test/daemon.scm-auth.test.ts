// The SCM token and ID request tokens reach the containers as go-vela/worker puts them there
// (W executor/linux/build.go UpdateSCMAuth, executor/linux/step.go CreateStep,
// internal/step/environment.go), against vela-sim's install-token routes (S api/build/
// refresh_install.go, post_install.go, id_request_token.go, compile_publish.go), real Redis, Docker.
import { createHash, randomUUID } from 'node:crypto';
import { VelaSim } from '@berth/vela-sim';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IMAGE, type WorkerHandle, executable, startWorker, uniqueRoute, waitFor, waitForBuildOver } from './daemon-harness.ts';

let sim: VelaSim;
let worker: WorkerHandle;
const route = uniqueRoute('scm');
const sha = (s: string): string => createHash('sha256').update(s).digest('hex');

beforeAll(async () => {
  // 10-minute install tokens: inside Go's 45-minute refresh window from the start.
  sim = await VelaSim.start({ installTokenTtlSec: 600 });
  worker = await startWorker(sim, { route });
  await waitFor('the worker to register', () => worker.daemon.registered);
});

afterAll(async () => {
  await worker?.stop();
  await sim?.close();
});

async function run(yaml: string, repoFields: Record<string, unknown>) {
  const repo = `r-${randomUUID().slice(0, 8)}`;
  const pipeline = executable(yaml, { org: 'octo', repo, number: 1 });
  const { build } = await sim.enqueueBuild({ org: 'octo', repo, number: 1, pipeline, route, repoFields });
  const id = build.id!;
  await waitForBuildOver(sim, id);
  return { id, repo, build: sim.builds.get(id)! };
}

// The build script writes VELA_NETRC_PASSWORD into ~/.netrc and unsets it (Vela's script header).
const printEnv = `sed -n 's/^password //p' $HOME/.netrc | tr -d '\\n' | sha256sum | cut -c1-64 | sed 's/^/netrc=/'`;

describe('SCM and ID tokens in containers (Docker)', { timeout: 90_000 }, () => {
  it('clone and steps get the install token, refreshed when within 45 min of expiry; a git.token step gets its own; id_request steps get a request token', async () => {
    const { id, repo, build } = await run(
      `
version: "1"
steps:
  - name: fetch
    image: ${IMAGE}
    pull: never
    commands:
      - ${printEnv}
      - '[ "$VELA_GIT_TOKEN" = "$(sed -n "s/^password //p" $HOME/.netrc)" ] && echo same-token'
      - echo "exp=$VELA_GIT_TOKEN_EXPIRATION"
      - echo "plain=$VELA_GIT_TOKEN"
  - name: scoped
    image: ${IMAGE}
    pull: never
    git:
      token:
        repositories: [ other-repo ]
        permissions: { contents: write }
    commands:
      - ${printEnv}
  - name: oidc
    image: ${IMAGE}
    pull: never
    id_request: yes
    commands:
      - '[ -n "$VELA_ID_TOKEN_REQUEST_TOKEN" ] && echo have-id-token'
      - echo "url=$VELA_ID_TOKEN_REQUEST_URL"
`,
      { install_id: 7 },
    );
    expect(build.error).toBeUndefined();
    expect(build.status).toBe('success');
    const minted = sim.installTokenLog.filter((t) => t.buildId === id);
    // compile_publish's token, its refresh (GET with the Token header), the scoped POST.
    expect(minted.map((t) => t.repositories)).toEqual([[repo], [repo], ['other-repo']]);
    const [original, refreshed, scoped] = minted;
    expect(sim.callsTo('GET', `/api/v1/repos/octo/${repo}/builds/1/install_token`).map((c) => c.status)).toEqual([200]);
    const post = sim.callsTo('POST', `/api/v1/repos/octo/${repo}/builds/1/install_token`);
    expect(post.map((c) => c.status)).toEqual([200]);
    expect(post[0]!.summary).toContain('"repositories":["other-repo"]');

    const clone = sim.stepLog(id, 2)!.toString('utf8');
    expect(clone).toContain(`netrc=${sha(refreshed!.token)}`);
    expect(clone).not.toContain(sha(original!.token));
    expect(clone).toContain('same-token');
    expect(clone).toContain(`exp=${refreshed!.expiration}`);
    expect(clone).toContain('plain=***');
    expect(clone).not.toContain(refreshed!.token);
    expect(sim.stepLog(id, 3)!.toString('utf8')).toContain(`netrc=${sha(scoped!.token)}`);

    const oidc = sim.stepLog(id, 4)!.toString('utf8');
    expect(oidc).toContain('have-id-token');
    expect(oidc).toContain(`url=${sim.url}/api/v1/repos/octo/${repo}/builds/1/id_token`);
    const idCalls = sim.callsTo('GET', `/api/v1/repos/octo/${repo}/builds/1/id_request_token`);
    expect(idCalls.map((c) => [c.status, c.query])).toEqual([[200, `image=${encodeURIComponent(IMAGE)}&request=yes&commands=true`]]);
    // Evicted once the build ended (S api/build/update.go).
    expect([...sim.installTokens.values()].filter((t) => t.buildId === id)).toEqual([]);
  });

  it("a git.token step on a repo without an installation errors the build with the server's answer", async () => {
    const { build } = await run(
      `
version: "1"
steps:
  - name: scoped
    image: ${IMAGE}
    pull: never
    git:
      token:
        repositories: [ other-repo ]
    commands: [ "echo never" ]
`,
      {},
    );
    expect(build.status).toBe('error');
    expect(build.error).toMatch(/unable to update SCM auth: unable to post install token: .*400.*installation ID/);
  });
});
