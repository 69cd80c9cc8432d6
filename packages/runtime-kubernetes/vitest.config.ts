import { berthVitestConfig, testFilesImporting } from '../../vitest.shared.ts';

// The files that import @berth/kube-cluster run on the real cluster: the test command runs them in
// its cluster lane and the others (kube-sim, fakes) in its local lane (BERTH_TEST_LANE), as many at
// once as BERTH_TEST_WORKERS says (the local lane: 2). Two at once used to fail the conformance
// suite's 50 MiB case (this process's RSS grew by 470 MB against its bound) and the log rotation
// against kube-sim, while kube-sim ran in the test's process and carried every log byte there; the
// suite now runs kube-sim as a child process (test/helpers.ts), and two at once took these files
// from 247 s to 127 s.
export const config = berthVitestConfig(
  import.meta.dirname,
  {},
  {
    realClusterFiles: testFilesImporting(import.meta.dirname, 'test', '@berth/kube-cluster'),
  },
);
// vitest reads the default export.
// eslint-disable-next-line no-restricted-syntax
export default config;
