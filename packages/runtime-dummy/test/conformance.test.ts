import { background } from '@berth/context';
import { runtimeConformance } from '@berth/runtime-conformance';
import { dummyRuntime, DummyEngine } from '../src/index.ts';

// The dummy lacks nothing the suite checks: no capability is skipped.
const descriptor = dummyRuntime({ engine: new DummyEngine() });
runtimeConformance('dummy', (config) => descriptor.create(background(), config));
