// The shared Runtime conformance suite against the host runtime, with the skips it declares (its
// `conformance` export, which `berth runtimes verify host` uses too).
import { runtimeConformance } from '@berth/runtime-conformance';
import { conformance, hostRuntime } from '../src/index.ts';

runtimeConformance('host', hostRuntime({ warn: () => undefined }), conformance);
