/**
 * What must hold after every soak build, whatever the runtime did (issue #13, "A seeded
 * fault-injection soak"). Each check returns the violations it found, in words.
 */
import type { Build } from '@berth/pipeline';
import type { ReapReport } from '@berth/runtime';
import type { BuildReport, StepReport } from '../../src/reporter.ts';
import type { RecordingReporter } from '../helpers.ts';
import { secretForms } from './pipeline.ts';

const FINAL = new Set(['success', 'failure', 'error', 'canceled', 'killed', 'skipped']);

/** Every container of `build` by name, with the init step. */
function targetNames(build: Build): string[] {
  return ['init', ...build.services.map((s) => s.name), ...build.steps.map((s) => s.name), ...build.stages.flatMap((st) => st.steps.map((s) => s.name))];
}

/**
 * Each step, service and the init step got exactly one final status, as its last report; the
 * build's status follows Vela's rules (go-vela/worker `executor/linux/build.go` ExecBuild and
 * DestroyBuild; `executor/linux/step.go` ExecStep: a failing step fails the build unless its
 * ruleset says `continue`).
 */
export function checkStatuses(build: Build, reporter: RecordingReporter, result: { status: string; build: BuildReport }, canceled: boolean): string[] {
  const out: string[] = [];
  for (const name of targetNames(build)) {
    const statuses = reporter.statuses(name);
    const finals = statuses.filter((s) => FINAL.has(s));
    if (finals.length !== 1) out.push(`${name}: ${finals.length} final statuses (${statuses.join(' → ') || 'none'}), want exactly one`);
    else if (!FINAL.has(statuses.at(-1) ?? '')) out.push(`${name}: a status after its final one (${statuses.join(' → ')})`);
  }
  const finalBuild = reporter.builds.filter((b) => FINAL.has(b.status));
  if (finalBuild.length !== 1) out.push(`build: ${finalBuild.length} final build statuses (${reporter.builds.map((b) => b.status).join(' → ')}), want one`);
  const status = result.status;
  if (reporter.buildStatusNow !== status) out.push(`build: runBuild says ${status}, the reporter last heard ${reporter.buildStatusNow}`);
  const last = new Map<string, StepReport>();
  for (const s of reporter.steps) last.set(s.name, s);
  const reports = [...last.values()];
  const blocking = reports.filter((s) => s.status === 'failure' && !s.continueOnFailure && s.kind !== 'init');
  switch (status) {
    case 'success':
      for (const s of reports) {
        if (!['success', 'skipped'].includes(s.status) && !(s.status === 'failure' && s.continueOnFailure))
          out.push(`build success but ${s.name} is ${s.status}`);
      }
      if (result.build.error !== undefined) out.push(`build success with an error: ${result.build.error}`);
      break;
    case 'failure':
      if (blocking.length === 0) out.push(`build failure but no step failed without continue (${reports.map((s) => `${s.name}=${s.status}`).join(', ')})`);
      break;
    case 'error':
      if (!result.build.error) out.push('build error without an error message');
      break;
    case 'canceled':
      if (!canceled) out.push('build canceled but nobody canceled it');
      break;
    default:
      out.push(`build ended ${status}, not a final status`);
  }
  for (const s of reports) {
    if (s.status === 'success' && s.exitCode !== 0) out.push(`${s.name}: success with exit code ${s.exitCode}`);
    if (s.status === 'failure' && s.exitCode === 0 && s.kind !== 'init') out.push(`${s.name}: failure with exit code 0`);
  }
  return out;
}

/** No form of any secret in any log, step error, build error, runtime event or logged warning. */
export function checkSecrets(
  secretValues: readonly string[],
  reporter: RecordingReporter,
  result: { build: BuildReport },
  warnings: readonly string[],
): string[] {
  const out: string[] = [];
  const texts: Array<[string, string]> = [];
  for (const name of reporter.chunks.keys()) texts.push([`log of ${name}`, reporter.log(name)]);
  for (const s of reporter.steps) if (s.error !== undefined) texts.push([`error of ${s.name}`, s.error]);
  if (result.build.error !== undefined) texts.push(['build error', result.build.error]);
  for (const e of reporter.events) if (e.event.type === 'notice') texts.push([`event of ${e.target.name}`, e.event.message]);
  for (const w of warnings) texts.push(['a logged warning', w]);
  for (const value of secretValues) {
    for (const form of secretForms(value)) {
      for (const [where, text] of texts) {
        if (text.includes(form)) out.push(`secret form ${JSON.stringify(form)} in the ${where}`);
      }
    }
  }
  return out;
}

/** What `reap` found of the build: nothing, unless a cleanup call was made to fail. */
export function checkLeftovers(report: ReapReport, cleanupFaulted: boolean): string[] {
  const kinds = (['containers', 'networks', 'volumes', 'pods'] as const).filter((k) => report[k].length > 0);
  if (kinds.length === 0 || cleanupFaulted) return [];
  return [`left behind (reap removed them): ${kinds.map((k) => `${k} ${report[k].join(' ')}`).join('; ')}`];
}
