import { expect } from '../expect.ts';
import { conformanceBuild, conformanceStep } from '../builders.ts';
import { setupBuildResources, teardownBuild } from '../drive.ts';
import { expectExit, expectState, oneStep, run, runOne, type ConformanceCase } from './shared.ts';

/** An exit-code case: `script` must end with `code` (and print exactly `logs` when given). */
function exitCase(name: string, script: string[], code: number, logs?: string, tools?: string[]): ConformanceCase {
  return {
    group: 'container',
    name,
    ...(tools === undefined ? {} : { tools }),
    async run(h) {
      const result = await runOne(h, { script });
      expectExit(result, code);
      if (logs !== undefined) expect(result.logs).toBe(logs);
    },
  };
}

/** The cases of the `container` group: commands, entrypoint, scripts, exit codes, env, directory, user, inspect. */
export function containerCases(): ConformanceCase[] {
  return [
    {
      group: 'container',
      name: 'runs the commands as the command line when there is no entrypoint, exit code 0',
      async run(h) {
        const result = await runOne(h, { commands: ['echo', 'hello', 'from', 'commands'] });
        expect(result.logs).toBe('hello from commands\n');
        expectExit(result, 0);
      },
    },
    {
      group: 'container',
      name: 'runs the entrypoint with the commands as its arguments',
      async run(h) {
        const result = await runOne(h, { entrypoint: ['echo', 'entry'], commands: ['one', 'two'] });
        expect(result.logs).toBe('entry one two\n');
        expectExit(result, 0);
      },
    },
    {
      group: 'container',
      name: 'runs a Vela build script (VELA_BUILD_SCRIPT through /bin/sh -e) line by line',
      async run(h) {
        const result = await runOne(h, { script: ['echo first', 'echo second'] });
        expect(result.logs).toBe('first\nsecond\n');
        expectExit(result, 0);
      },
    },
    exitCase('reports exit code 1 and stops the script at its first failing command', ['echo before', 'false', 'echo after'], 1, 'before\n'),
    exitCase('reports another exit code (3) as is', ['exit 3'], 3),
    exitCase("reports exit code 137 when the step's command is killed with SIGKILL", ["sh -c 'kill -9 $$'"], 137, undefined, ['kill']),
    {
      group: 'container',
      name: "passes the container's environment to its process, values verbatim",
      tools: ['printf'],
      async run(h) {
        const special = `a=b c 'single' "double" $NOT_EXPANDED \\ end`;
        const result = await runOne(h, {
          script: ['echo "value=$BERTH_CONFORMANCE_VALUE"', `printf '%s\\n' "$BERTH_CONFORMANCE_SPECIAL"`],
          environment: { BERTH_CONFORMANCE_VALUE: 'hello conformance', BERTH_CONFORMANCE_SPECIAL: special },
        });
        expect(result.logs).toBe(`value=hello conformance\n${special}\n`);
        expectExit(result, 0);
      },
    },
    {
      group: 'container',
      name: "runs in the container's working directory",
      tools: ['cat'],
      async run(h) {
        // Named relative to the workspace: a runtime may put the workspace elsewhere than
        // workspacePath (a per-build directory on a host) as long as `directory` maps into it.
        const ws = h.options.workspacePath;
        const runtime = await h.runtime();
        const build = conformanceBuild();
        const writer = conformanceStep(build, 'writer', 1, {
          image: h.options.image,
          directory: `${ws}/src/conformance`,
          script: ['echo in-working-directory > here.txt'],
        });
        const reader = conformanceStep(build, 'reader', 2, { image: h.options.image, directory: ws, script: ['cat src/conformance/here.txt'] });
        build.steps = [writer, reader];
        h.track(runtime, build);
        await setupBuildResources(h.ctx(), runtime, build);
        expectExit(await run(h, runtime, build, writer), 0, 'exit code of the step writing in its working directory');
        const read = await run(h, runtime, build, reader);
        expect(read.logs, 'the file the first step wrote in `<workspace>/src/conformance`, read from the workspace').toBe('in-working-directory\n');
        expectExit(read, 0);
        await teardownBuild(h.ctx(), runtime, build);
      },
    },
    {
      group: 'container',
      name: 'mounts the workspace at workspacePath itself',
      capabilities: ['fixedWorkspacePath'],
      async run(h) {
        const directory = `${h.options.workspacePath}/src/conformance`;
        const result = await runOne(h, { script: ['pwd'], directory });
        expect(result.logs).toBe(`${directory}\n`);
        expectExit(result, 0);
      },
    },
    {
      group: 'container',
      name: "runs as the container's user",
      capabilities: ['user'],
      tools: ['id'],
      async run(h) {
        const result = await runOne(h, { script: ['id -u'], user: '1000' });
        expect(result.logs).toBe('1000\n');
        expectExit(result, 0);
      },
    },
    {
      group: 'container',
      name: 'inspectContainer reports created before the run and exited with the exit code after it',
      async run(h) {
        const { runtime, build, step } = await oneStep(h, { script: ['exit 5'] });
        await expectState(h, runtime, step, 'created', undefined, 'inspectContainer before runContainer');
        const result = await run(h, runtime, build, step);
        expectExit(result, 5);
        await expectState(h, runtime, step, 'exited', 5, 'inspectContainer after the exit');
      },
    },
  ];
}
