import type { ConformanceOptions, CaseResult, ConformanceCapability } from '@berth/runtime-conformance/runner';
import { CONTRACT_VERSION, type RuntimeDescriptor } from '@berth/runtime';
import { CommandError, EXIT } from '../exit-codes.ts';

/**
 * The conformance options a plugin module offers for `berth runtimes verify`: its export named
 * `conformance`, an object of `ConformanceOptions` (or a function returning one), e.g. the
 * capabilities it lacks with their reasons (`skip`) and the image the cases run.
 */
export async function pluginConformanceOptions(exports: Readonly<Record<string, unknown>> | undefined, spec: string): Promise<ConformanceOptions> {
  const given = exports?.conformance;
  if (given === undefined) return {};
  let value: unknown = given;
  try {
    if (typeof given === 'function') value = await (given as () => unknown)();
  } catch (error) {
    throw new CommandError(`${spec}: its conformance export failed: ${(error as Error).message ?? String(error)}`, EXIT.usage);
  }
  if (typeof value !== 'object' || value === null) {
    throw new CommandError(
      `${spec}: its conformance export is ${value === null ? 'null' : typeof value}, not conformance options ({ skip, image, … })`,
      EXIT.usage,
    );
  }
  return value;
}

/** Parses `--skip capability=reason` flags. */
export function skipFlags(values: readonly string[]): Partial<Record<ConformanceCapability, string>> {
  const skip: Record<string, string> = {};
  for (const value of values) {
    const eq = value.indexOf('=');
    if (eq <= 0 || value.slice(eq + 1).trim() === '')
      throw new CommandError(`--skip ${JSON.stringify(value)}: give capability=reason, e.g. --skip "privileged=rootless engine"`);
    skip[value.slice(0, eq)] = value.slice(eq + 1);
  }
  return skip;
}

const RESULT_WIDTH = 7;
const REQUIREMENT_WIDTH = 'optional: hostWorkspace'.length;

/** The table's header line. */
export function tableHeader(): string {
  return `${'RESULT'.padEnd(RESULT_WIDTH)}  ${'REQUIREMENT'.padEnd(REQUIREMENT_WIDTH)}  CASE\n`;
}

/** One case as a row of the table, with its reason beneath when it failed or was skipped. */
export function tableRow(result: CaseResult): string {
  const label = result.name.startsWith(`${result.group}:`) ? result.name : `${result.group}: ${result.name}`;
  const row = `${result.status.padEnd(RESULT_WIDTH)}  ${result.requirement.padEnd(REQUIREMENT_WIDTH)}  ${label}\n`;
  if (result.reason === undefined) return row;
  const indent = ' '.repeat(RESULT_WIDTH + REQUIREMENT_WIDTH + 4);
  const reason = result.reason.split('\n').slice(0, 12).join(`\n${indent}  `);
  return `${row}${indent}└ ${reason}\n`;
}

/** The verdict after the table. */
export function verdict(descriptor: RuntimeDescriptor, results: readonly CaseResult[]): string {
  const count = (status: CaseResult['status']) => results.filter((r) => r.status === status).length;
  const requiredFailures = results.filter((r) => r.status === 'failed' && r.requirement === 'required').length;
  const optionalFailures = count('failed') - requiredFailures;
  const capabilities = descriptor.capabilities?.length ? descriptor.capabilities.join(', ') : 'none declared';
  const head =
    `\n${descriptor.name} ${descriptor.version} (contract ${descriptor.contract}; optional capabilities: ${capabilities}), ` +
    `against Runtime contract ${CONTRACT_VERSION}: ${count('passed')} passed, ${count('failed')} failed, ${count('skipped')} skipped.\n`;
  if (requiredFailures > 0) return `${head}It does not conform: ${requiredFailures} required case${requiredFailures === 1 ? '' : 's'} failed.\n`;
  if (optionalFailures > 0)
    return `${head}It does not conform: ${optionalFailures} case${optionalFailures === 1 ? '' : 's'} of a capability it declares failed (the worker will use it).\n`;
  return `${head}It conforms.\n`;
}
