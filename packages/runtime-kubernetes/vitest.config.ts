import { berthVitestConfig, testFilesImporting } from '../../vitest.shared.ts';

// The files that import @berth/kube-cluster run on the real cluster: the test command runs them in
// its cluster lane and the others (kube-sim, fakes) in its local lane (BERTH_TEST_LANE).
// BERTH_TEST_WORKERS (the test command's local lane) is not followed here: one file at a time.
// kube-sim runs in the test's process and carries every log byte, so the conformance suite's
// 50 MiB case (this process's RSS) and the log rotation against kube-sim (the copy must keep up
// with the container) need the cores. With two
// files at once (load 15), both failed (RSS grew by 470 MB against 300; 2 rotations of 3); one at
// a time, the rotation case failed as well under load 17, the 50 MiB case passed.
export const config = berthVitestConfig(import.meta.dirname, process.env.BERTH_TEST_WORKERS === undefined ? {} : { maxWorkers: 1 }, {
  realClusterFiles: testFilesImporting(import.meta.dirname, 'test', '@berth/kube-cluster'),
});
// vitest reads the default export.
// eslint-disable-next-line no-restricted-syntax
export default config;
