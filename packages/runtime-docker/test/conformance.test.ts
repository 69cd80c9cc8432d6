import { background } from '@berth/context';
import { runtimeConformance } from '@berth/runtime-conformance';
import { dockerRuntime } from '../src/index.ts';
import { privilegedUnsupported } from './fixture.ts';

// Skipped only when this engine cannot start privileged containers at all (some sandboxes), with its message.
const privileged = await privilegedUnsupported();

// The whole Runtime contract against the real engine (DOCKER_HOST or /var/run/docker.sock).
runtimeConformance('docker', (config) => dockerRuntime({ stopGraceMs: 2_000 }).create(background(), config), {
  skip: privileged === undefined ? {} : { privileged: `this engine cannot start privileged containers (${privileged})` },
});
