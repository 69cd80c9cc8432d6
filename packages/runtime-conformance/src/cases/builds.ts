import type { Build } from '@berth/pipeline';
import { expect } from '../expect.ts';
import { conformanceBuild, conformanceService, conformanceStep } from '../builders.ts';
import { setupBuildResources, teardownBuild } from '../drive.ts';
import { expectExit, expectGone, expectNothingLeft, expectState, hasSysAdmin, imageNameWithoutTag, run, runOne, type ConformanceCase } from './shared.ts';

/** The cases of the `builds`, `cleanup` and `privileged` groups. */
export function buildCases(): ConformanceCase[] {
  return [
    // ---- builds -------------------------------------------------------------------------------
    {
      group: 'builds',
      name: 'a detached service is reachable by its name from a step of the same build',
      capabilities: ['serviceNetworking'],
      tools: ['nc', 'sleep'],
      async run(h) {
        const runtime = await h.runtime();
        const build = conformanceBuild();
        const service = conformanceService(build, 'conformance-echo', 1, {
          image: h.options.image,
          script: ['nc -ll -p 8080 -e echo hello-from-service'],
        });
        const attempts = Array.from({ length: 60 }, (_, i) => i + 1).join(' ');
        const step = conformanceStep(build, 'client', 1, {
          image: h.options.image,
          script: [
            `for attempt in ${attempts}; do`,
            '  if nc conformance-echo 8080 </dev/null 2>/dev/null; then exit 0; fi',
            '  sleep 0.25',
            'done',
            'echo service-unreachable',
            'exit 1',
          ],
        });
        build.services = [service];
        build.steps = [step];
        h.track(runtime, build);
        await setupBuildResources(h.ctx(), runtime, build);
        await runtime.runContainer(h.ctx(), service, build);
        const result = await run(h, runtime, build, step);
        expect(result.logs).toContain('hello-from-service');
        expectExit(result, 0);
        await teardownBuild(h.ctx(), runtime, build);
      },
    },
    {
      group: 'builds',
      name: 'the steps of one build share its workspace',
      tools: ['cat'],
      async run(h) {
        const runtime = await h.runtime();
        const ws = h.options.workspacePath;
        const build = conformanceBuild();
        const writer = conformanceStep(build, 'writer', 1, { image: h.options.image, directory: ws, script: ['echo shared-marker > x'] });
        const reader = conformanceStep(build, 'reader', 2, { image: h.options.image, directory: ws, script: ['cat x'] });
        build.steps = [writer, reader];
        h.track(runtime, build);
        await setupBuildResources(h.ctx(), runtime, build);
        expectExit(await run(h, runtime, build, writer), 0, 'exit code of the writer');
        const read = await run(h, runtime, build, reader);
        expect(read.logs).toBe('shared-marker\n');
        expectExit(read, 0);
        await teardownBuild(h.ctx(), runtime, build);
      },
    },
    {
      group: 'builds',
      name: "two builds running at the same time do not see each other's workspace",
      capabilities: ['parallelBuilds'],
      tools: ['sleep', 'cat'],
      async run(h) {
        const runtime = await h.runtime();
        const ws = h.options.workspacePath;
        const one = async (mine: string, theirs: string) => {
          const build = conformanceBuild();
          const step = conformanceStep(build, 'marker', 1, {
            image: h.options.image,
            directory: ws,
            script: [
              `echo ${mine} > marker-${mine}`,
              'sleep 1',
              `cat marker-${mine}`,
              `if [ -e marker-${theirs} ]; then echo saw-${theirs}; else echo no-${theirs}; fi`,
            ],
          });
          build.steps = [step];
          h.track(runtime, build);
          await setupBuildResources(h.ctx(), runtime, build);
          const result = await run(h, runtime, build, step);
          await teardownBuild(h.ctx(), runtime, build);
          return result;
        };
        const [a, b] = await Promise.all([one('a', 'b'), one('b', 'a')]);
        expect(a.logs).toBe('a\nno-b\n');
        expect(b.logs).toBe('b\nno-a\n');
        expectExit(a, 0, 'exit code of build a');
        expectExit(b, 0, 'exit code of build b');
      },
    },

    // ---- cleanup ------------------------------------------------------------------------------
    {
      group: 'cleanup',
      name: 'removeBuild alone removes every container of the build, running or exited, and is idempotent',
      tools: ['sleep'],
      async run(h) {
        const runtime = await h.runtime();
        const build = conformanceBuild();
        // A step left running (as a step of a parallel stage is when the build is cancelled), and one that exited.
        const sleeper = conformanceStep(build, 'sleeper', 1, { image: h.options.image, script: ['sleep 300'] });
        const step = conformanceStep(build, 'done', 2, { image: h.options.image, script: ['echo done'] });
        build.steps = [sleeper, step];
        h.track(runtime, build);
        await setupBuildResources(h.ctx(), runtime, build);
        await runtime.runContainer(h.ctx(), sleeper, build);
        expectExit(await run(h, runtime, build, step), 0);
        await expectState(h, runtime, sleeper, 'running', undefined, 'the sleeping step before removeBuild');

        await runtime.removeBuild(h.ctx(), build);
        for (const container of [sleeper, step]) await expectGone(h, runtime, container);
        expectNothingLeft(await runtime.reap(h.ctx(), h.workerIdOf(runtime)));
        await runtime.removeBuild(h.ctx(), build);
        await runtime.removeContainer(h.ctx(), step);
      },
    },
    {
      group: 'cleanup',
      name: "reap removes what a crashed worker left behind, sparing the builds in keep and other workers' builds",
      capabilities: ['reap'],
      tools: ['sleep'],
      timeoutFactor: 2,
      async run(h) {
        const workerId = h.newWorkerId();
        const crashed = await h.runtime({ workerId });
        const leftBuilds: Build[] = [];
        for (const name of ['first', 'second']) {
          const build = conformanceBuild();
          const step = conformanceStep(build, `left-${name}`, 1, { image: h.options.image, script: ['sleep 300'] });
          build.steps = [step];
          await setupBuildResources(h.ctx(), crashed, build);
          await crashed.runContainer(h.ctx(), step, build);
          leftBuilds.push(build);
        }
        // The worker "crashes": nothing is removed; its process's own sockets go away.
        await crashed.close().catch(() => undefined);

        const other = await h.runtime();
        const otherBuild = conformanceBuild();
        const otherStep = conformanceStep(otherBuild, 'other', 1, { image: h.options.image, script: ['sleep 300'] });
        otherBuild.steps = [otherStep];
        h.track(other, otherBuild);
        await setupBuildResources(h.ctx(), other, otherBuild);
        await other.runContainer(h.ctx(), otherStep, otherBuild);

        const successor = await h.runtime({ workerId });
        const [first, second] = leftBuilds as [Build, Build];
        h.track(successor, first);
        h.track(successor, second);
        const removed = await successor.reap(h.ctx(), workerId, new Set([second.id]));
        expect(removed.containers.length + removed.pods.length, `first reap: ${JSON.stringify(removed)}`).toBeGreaterThan(0);
        expectNothingLeft(await successor.reap(h.ctx(), workerId, new Set([second.id])));
        const rest = await successor.reap(h.ctx(), workerId);
        expect(rest.containers.length + rest.pods.length, `reap without keep: ${JSON.stringify(rest)}`).toBeGreaterThan(0);
        expectNothingLeft(await successor.reap(h.ctx(), workerId));

        await expectState(h, other, otherStep, 'running', undefined, "the other worker's step");
        await teardownBuild(h.ctx(), other, otherBuild);
      },
    },

    // ---- privileged ---------------------------------------------------------------------------
    {
      group: 'privileged',
      name: 'a container asking for privileged with an image not in privilegedImages runs unprivileged',
      capabilities: ['linuxProc', 'confinement'],
      tools: ['cat'],
      async run(h) {
        const result = await runOne(h, { privileged: true, script: ['cat /proc/self/status'] }, { privilegedImages: ['berth/not-this-image'] });
        expectExit(result, 0);
        expect(hasSysAdmin(result.logs), 'CAP_SYS_ADMIN in CapEff').toBe(false);
      },
    },
    {
      group: 'privileged',
      name: 'a container not asking for privileged runs unprivileged even with an allowlisted image',
      capabilities: ['linuxProc', 'confinement'],
      tools: ['cat'],
      async run(h) {
        const result = await runOne(h, { privileged: false, script: ['cat /proc/self/status'] }, { privilegedImages: [imageNameWithoutTag(h.options.image)] });
        expectExit(result, 0);
        expect(hasSysAdmin(result.logs), 'CAP_SYS_ADMIN in CapEff').toBe(false);
      },
    },
    {
      group: 'privileged',
      name: 'a container asking for privileged with an allowlisted image runs privileged',
      capabilities: ['linuxProc', 'privileged'],
      tools: ['cat'],
      async run(h) {
        const result = await runOne(h, { privileged: true, script: ['cat /proc/self/status'] }, { privilegedImages: [imageNameWithoutTag(h.options.image)] });
        expectExit(result, 0);
        expect(hasSysAdmin(result.logs), 'CAP_SYS_ADMIN in CapEff').toBe(true);
      },
    },
  ];
}
