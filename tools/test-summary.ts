// Sums the vitest JSON reports of every package into the closing line
// `tests: N passed, N failed[, N skipped]`, and decides the test command's exit status.
// usage: node tools/test-summary.ts <report-dir> <turbo-exit-status> <seconds> [failed step …]
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

interface VitestJsonReport {
  success: boolean;
  numTotalTests: number;
  numPassedTests: number;
  numFailedTests: number;
  numPendingTests: number;
  numTodoTests: number;
  numFailedTestSuites: number;
  testResults?: { name?: string; startTime?: number; endTime?: number; assertionResults?: { fullName?: string; status?: string }[] }[];
}

/** Tests of the real-cluster lane are named so (tools/kube-cluster; "on real cluster", "(real cluster)"). */
const REAL_CLUSTER = /real cluster/;

const [reportDir = '.reports/vitest', turboStatus = '0', seconds = '0', ...failedSteps] = process.argv.slice(2);
const reports = existsSync(reportDir)
  ? readdirSync(reportDir)
      .filter((f) => f.endsWith('.json') && !f.endsWith('.files.json'))
      .sort()
  : [];
let passed = 0;
let failed = 0;
let skipped = 0;
let brokenSuites = 0;
const rows: string[] = [];
const lane = { passed: 0, failed: 0, skipped: 0 };
const files: { name: string; ms: number }[] = [];
for (const file of reports) {
  const report = JSON.parse(readFileSync(path.join(reportDir, file), 'utf8')) as VitestJsonReport;
  passed += report.numPassedTests;
  failed += report.numFailedTests;
  skipped += report.numPendingTests + report.numTodoTests;
  // A test file that failed to load counts no test but fails its suite.
  if (report.numFailedTestSuites > 0 && report.numFailedTests === 0) brokenSuites += report.numFailedTestSuites;
  // Each file's whole time (imports and hooks too), from vitest.shared.ts' FileTimes; else its first test to its last.
  const wholeFile = path.join(reportDir, file.replace(/\.json$/, '.files.json'));
  const whole = existsSync(wholeFile) ? (JSON.parse(readFileSync(wholeFile, 'utf8')) as { name: string; ms: number }[]) : undefined;
  for (const f of whole ?? []) files.push({ name: path.relative(process.cwd(), f.name), ms: f.ms });
  let first = Number.POSITIVE_INFINITY;
  let last = 0;
  for (const result of report.testResults ?? []) {
    if (result.startTime !== undefined && result.endTime !== undefined) {
      first = Math.min(first, result.startTime);
      last = Math.max(last, result.endTime);
      if (whole === undefined) files.push({ name: path.relative(process.cwd(), result.name ?? '?'), ms: result.endTime - result.startTime });
    }
    for (const test of result.assertionResults ?? []) {
      if (!REAL_CLUSTER.test(test.fullName ?? '')) continue;
      if (test.status === 'passed') lane.passed += 1;
      else if (test.status === 'failed') lane.failed += 1;
      else lane.skipped += 1;
    }
  }
  const name = file.replace(/\.json$/, '').replace('__', '/');
  const seconds = last > first ? `${Math.round((last - first) / 1000)} s`.padStart(7) : '';
  rows.push(
    `  ${`@${name}`.padEnd(34)} ${String(report.numPassedTests).padStart(5)} passed ${String(report.numFailedTests).padStart(4)} failed ${String(report.numPendingTests + report.numTodoTests).padStart(4)} skipped${seconds}`,
  );
}

console.log(`\n==> summary (${seconds} s)`);
if (rows.length > 0) console.log(rows.join('\n'));
const slowest = files.toSorted((a, b) => b.ms - a.ms).slice(0, 8);
if (slowest.length > 0) console.log(`  slowest files: ${slowest.map((f) => `${f.name} ${Math.round(f.ms / 1000)} s`).join(', ')}`);
console.log(`  of which on the real Kubernetes cluster: ${lane.passed} passed, ${lane.failed} failed, ${lane.skipped} skipped`);
const problems = [...failedSteps];
if (Number(turboStatus) !== 0) problems.push(`a package's test task failed (turbo exit ${turboStatus})`);
if (brokenSuites > 0) problems.push(`${brokenSuites} test file(s) failed to load`);
if (passed + failed === 0) problems.push('no test ran');
for (const p of problems) console.log(`  problem: ${p}`);
console.log(`tests: ${passed} passed, ${failed} failed${skipped > 0 ? `, ${skipped} skipped` : ''}`);
process.exit(problems.length > 0 || failed > 0 ? 1 : 0);
