import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { expect } from '../expect.ts';
import { expectExit, runOne, type ConformanceCase } from './shared.ts';

/**
 * The optional `hostWorkspace` capability (RuntimeConfig.workspaceHostPath): `berth exec` runs a
 * pipeline on the current directory, as `vela exec` mounts it (go-vela/cli command/pipeline/exec.go
 * adds the local directory as the build's workspace volume).
 */
export function hostWorkspaceCases(): ConformanceCase[] {
  return [
    {
      group: 'hostWorkspace',
      name: "with workspaceHostPath, steps run on that host directory: they read its files, and what they write stays there after the build's removal",
      capabilities: [],
      optional: 'hostWorkspace',
      tools: ['cat'],
      async run(h) {
        const dir = await mkdtemp(path.join(os.tmpdir(), 'berth-conformance-workspace-'));
        try {
          await writeFile(path.join(dir, 'from-host.txt'), 'host-marker\n');
          const result = await runOne(
            h,
            { directory: h.options.workspacePath, script: ['cat from-host.txt', 'echo step-marker > from-step.txt'] },
            { workspaceHostPath: dir },
          );
          expect(result.logs, 'the step read from-host.txt from the workspace').toBe('host-marker\n');
          expectExit(result, 0);
          expect(await readFile(path.join(dir, 'from-step.txt'), 'utf8').catch(() => undefined), 'from-step.txt in the host directory after removeBuild').toBe(
            'step-marker\n',
          );
        } finally {
          await rm(dir, { recursive: true, force: true }).catch(() => undefined);
        }
      },
    },
  ];
}
