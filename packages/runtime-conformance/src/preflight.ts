import { expect } from './expect.ts';
import { conformanceBuild, conformanceStep } from './builders.ts';
import type { ConformanceCase } from './cases/shared.ts';
import { collectStream, EarlyTailEndError, runToCompletion, setupBuildResources, teardownBuild, waitForExit } from './drive.ts';
import { CaseHarness, describeError } from './harness.ts';
import type { ConformanceFactory, ResolvedConformanceOptions } from './options.ts';
import { staticSkip } from './plan.ts';

/** The programs every script of the suite needs: the runner of a Vela build script. */
const SCRIPT_TOOLS: readonly string[] = ['sh', 'echo', 'base64'];

/**
 * How the preflight checks each program the suite's scripts call: a shell condition that holds
 * when the program is there and behaves as the scripts expect (`head -c`, `base64 -d`, …).
 */
const TOOL_PROBES: Readonly<Record<string, string>> = {
  sh: `[ "$(sh -c 'echo ok')" = ok ]`,
  echo: '[ "$(echo ok)" = ok ]',
  base64: '[ "$(echo b2sK | base64 -d)" = ok ]',
  printf: `[ "$(printf '%s' ok)" = ok ]`,
  sleep: 'sleep 0',
  cat: '[ "$(echo ok | cat)" = ok ]',
  env: 'env >/dev/null',
  id: '[ -n "$(id -u)" ]',
  pwd: '[ -n "$(pwd)" ]',
  head: '[ "$(echo okay | head -c 2)" = ok ]',
  yes: '[ "$(yes ok | head -n 1)" = ok ]',
  kill: `sh -c 'kill -9 $$' || [ $? -eq 137 ]`,
  nc: 'nc -h >/dev/null 2>&1 || [ $? -ne 127 ]',
};

/** What the tools probe found. */
export interface ToolsReport {
  /** Programs that are missing or do not behave as the scripts expect. */
  missing: string[];
  /** Why the probe itself could not run (the runtime failed), when it could not. */
  failure?: string;
}

/** What the live-tail probe found. */
export interface LiveTailReport {
  /** The clear failure when the live log stream ended before the container exited. */
  earlyEnd?: string;
  /** Any other failure of the probe (its exit code, its log, or the runtime's error). */
  failure?: string;
}

const LIVE_TAIL_CASE = 'a log stream opened while the container runs ends only after the container exited';

/**
 * The suite's preflight, run once per suite (lazily, so a filtered run still gets it): whether the
 * image (or host) has the programs the suite's scripts call, and whether a log stream opened
 * while a container runs follows it to its end. Each finding fails one preflight case with the
 * cause, and the cases that depend on it are skipped naming it, instead of each failing obscurely.
 */
export class Preflight {
  readonly #factory: ConformanceFactory;
  readonly #options: ResolvedConformanceOptions;
  readonly #cases: readonly ConformanceCase[];
  #tools: Promise<ToolsReport> | undefined;
  #liveTail: Promise<LiveTailReport> | undefined;

  constructor(factory: ConformanceFactory, options: ResolvedConformanceOptions, cases: readonly ConformanceCase[]) {
    this.#factory = factory;
    this.#options = options;
    this.#cases = cases;
  }

  /** The programs the cases that will run (not skipped by capability) call. */
  neededTools(): string[] {
    const tools = new Set(SCRIPT_TOOLS);
    for (const testCase of this.#cases) {
      if (staticSkip(testCase, this.#options) === undefined) for (const tool of testCase.tools ?? []) tools.add(tool);
    }
    return [...tools];
  }

  /** Runs (once) a script checking every needed program; never rejects. */
  tools(): Promise<ToolsReport> {
    this.#tools ??= this.#probeTools();
    return this.#tools;
  }

  /** Runs (once) a step printing a line, sleeping 1 s and printing another, read live; never rejects. */
  liveTail(): Promise<LiveTailReport> {
    this.#liveTail ??= this.#probeLiveTail();
    return this.#liveTail;
  }

  /** Why `testCase` cannot run meaningfully after the preflight's findings, or undefined. */
  async skipReason(testCase: ConformanceCase): Promise<string | undefined> {
    if (testCase.group === 'preflight' && testCase.tools === undefined) return undefined; // reports the tools itself
    const missing = (await this.tools()).missing.filter((tool) => SCRIPT_TOOLS.includes(tool) || testCase.tools?.includes(tool));
    if (missing.length > 0) return `needs ${missing.join(', ')}, which the preflight found missing where the runtime runs`;
    if (testCase.liveTail && (await this.liveTail()).earlyEnd !== undefined) {
      return `needs a log stream that follows the container to its exit; see the failed case "${LIVE_TAIL_CASE}"`;
    }
    return undefined;
  }

  async #probeTools(): Promise<ToolsReport> {
    const tools = this.neededTools();
    const script = [
      ...tools.map(
        (tool) => `if ${TOOL_PROBES[tool] ?? `${tool} --version >/dev/null 2>&1 || [ $? -ne 127 ]`}; then :; else echo "berth-preflight-missing ${tool}"; fi`,
      ),
      'echo berth-preflight-done',
    ];
    const h = new CaseHarness(this.#factory, this.#options);
    try {
      const runtime = await h.runtime();
      const build = conformanceBuild();
      const step = conformanceStep(build, 'preflight', 1, { image: this.#options.image, directory: this.#options.workspacePath, script });
      build.steps = [step];
      h.track(runtime, build);
      await setupBuildResources(h.ctx(), runtime, build);
      // Read after the exit, so that this probe does not depend on the live tail (probed apart).
      await runtime.runContainer(h.ctx(), step, build);
      const exit = await waitForExit(runtime, step, this.#options.timeouts.case);
      const ctx = h.ctx();
      const logs = (await collectStream(ctx, await runtime.tailContainer(ctx, step))).toString('utf8');
      await teardownBuild(h.ctx(), runtime, build);
      if (!logs.includes('berth-preflight-done') && exit.exitCode === 0) {
        return {
          missing: [],
          failure: `the probe script exited 0 but its log lacks its last line, "berth-preflight-done" (the runtime lost output); its log:\n${logs}`,
        };
      }
      if (!logs.includes('berth-preflight-done')) {
        // The script runner itself failed: sh, echo or base64 is missing or broken.
        return { missing: [...SCRIPT_TOOLS], failure: `the probe script did not finish (exit code ${exit.exitCode}); its log:\n${logs}` };
      }
      const missing = [...logs.matchAll(/^berth-preflight-missing (\S+)$/gm)].map((match) => match[1] as string);
      return { missing };
    } catch (error) {
      return { missing: [], failure: `the runtime failed while running the probe: ${describeError(error)}` };
    } finally {
      await h.dispose();
    }
  }

  async #probeLiveTail(): Promise<LiveTailReport> {
    const h = new CaseHarness(this.#factory, this.#options);
    try {
      const runtime = await h.runtime();
      const build = conformanceBuild();
      const step = conformanceStep(build, 'follow', 1, { image: this.#options.image, script: ['echo first', 'sleep 1', 'echo last'] });
      build.steps = [step];
      h.track(runtime, build);
      await setupBuildResources(h.ctx(), runtime, build);
      const result = await runToCompletion(runtime, build, step, { timeoutMs: this.#options.timeouts.case, earlyEnd: 'reject' });
      await teardownBuild(h.ctx(), runtime, build);
      if (result.logs !== 'first\nlast\n' || result.exit.exitCode !== 0) {
        return {
          failure: `expected the log "first\\nlast\\n" and exit code 0; got exit code ${result.exit.exitCode} and the log ${JSON.stringify(result.logs)}`,
        };
      }
      return {};
    } catch (error) {
      if (error instanceof EarlyTailEndError) return { earlyEnd: error.message };
      return { failure: `the runtime failed while running the probe: ${describeError(error)}` };
    } finally {
      await h.dispose();
    }
  }
}

/** The two cases of the `preflight` group: they report the preflight's findings, once. */
export function preflightCases(): ConformanceCase[] {
  return [
    {
      group: 'preflight',
      name: "the image (or host) has the programs the suite's scripts use",
      async run(h) {
        const report = await h.preflight.tools();
        if (report.failure !== undefined && report.missing.length === 0) throw new Error(`[berth] conformance preflight: ${report.failure}`);
        const users = h.preflight.neededTools().length;
        const message =
          `[berth] conformance preflight: ${JSON.stringify(h.options.image)} (or the host, for a runtime without images) lacks ` +
          `${report.missing.join(', ')}, or they do not behave as the suite's scripts expect (${report.missing.map((t) => `${t}: ${TOOL_PROBES[t] ?? '?'}`).join('; ')}). ` +
          `The cases that call them are skipped. Use an image that has them (option \`image\`) or install them where the runtime runs ` +
          `(the suite checked ${users} programs)${report.failure === undefined ? '' : `; ${report.failure}`}`;
        expect(report.missing, message).toEqual([]);
      },
    },
    {
      group: 'preflight',
      name: LIVE_TAIL_CASE,
      tools: ['sleep'],
      async run(h) {
        const report = await h.preflight.liveTail();
        if (report.earlyEnd !== undefined) {
          throw new Error(`${report.earlyEnd} The cases that read a live log are skipped; the others re-read the log after the exit.`);
        }
        if (report.failure !== undefined) throw new Error(`[berth] conformance preflight: ${report.failure}`);
      },
    },
  ];
}
