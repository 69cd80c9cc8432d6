import { buildCases } from './cases/builds.ts';
import { containerCases } from './cases/container.ts';
import { heldStartCases } from './cases/held-start.ts';
import { hostWorkspaceCases } from './cases/host-workspace.ts';
import { lifecycleCases } from './cases/lifecycle.ts';
import { logsCases } from './cases/logs.ts';
import { outputsCases } from './cases/outputs.ts';
import { preflightCases } from './preflight.ts';

export { imageNameWithoutTag, type ConformanceCase } from './cases/shared.ts';

/** Every case of the suite, in the order they run: preflight, container, logs, cancellation, images, builds, cleanup, privileged, outputs, hostWorkspace, heldStart. */
export function conformanceCases(): ReturnType<typeof containerCases> {
  return [
    ...preflightCases(),
    ...containerCases(),
    ...logsCases(),
    ...lifecycleCases(),
    ...buildCases(),
    ...outputsCases(),
    ...hostWorkspaceCases(),
    ...heldStartCases(),
  ];
}
