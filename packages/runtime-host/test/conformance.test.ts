// The shared Runtime conformance suite against the host runtime, with the skips it declares.
import { background } from '@berth/runtime';
import { runtimeConformance } from '@berth/runtime-conformance';
import { hostRuntime } from '../src/index.ts';

const isRoot = process.getuid?.() === 0;
const descriptor = hostRuntime({ warn: () => undefined });

runtimeConformance('host', (config) => descriptor.create(background(), config), {
  skip: {
    images: 'the host runtime runs no images: steps run on the host',
    fixedWorkspacePath: 'each build gets its own directory under the runtime root; workspacePath is mapped onto it',
    user: "steps run as the worker's user",
    serviceNetworking: 'the host runtime does not run services',
    privileged: "steps run with the worker's own privileges; the runtime grants none",
    outputs: 'the host runtime does not offer outputs (its steps share no /vela/outputs directory)',
    ...(isRoot ? { confinement: "the worker runs as root here, and its steps have root's privileges" } : {}),
    ...(process.platform === 'linux' ? {} : { linuxProc: `${process.platform} has no Linux /proc` }),
  },
});
