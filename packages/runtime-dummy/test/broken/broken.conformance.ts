// Not part of the normal test run (see vitest.config.ts): the conformance suite against a dummy
// with a deliberate fault, run by test/broken-suite.test.ts in a child vitest to prove it fails.
import { background } from '@berth/context';
import { runtimeConformance } from '@berth/runtime-conformance';
import { dummyRuntime, DummyEngine } from '../../src/index.ts';
import { BROKEN_MODES, brokenRuntime, type BrokenMode } from './broken-runtime.ts';

const mode = process.env.BERTH_DUMMY_BROKEN as BrokenMode;
if (!BROKEN_MODES.includes(mode)) throw new Error(`BERTH_DUMMY_BROKEN must be one of ${BROKEN_MODES.join(', ')}; got ${String(mode)}`);

const descriptor = dummyRuntime({ engine: new DummyEngine() });
runtimeConformance(`dummy (broken: ${mode})`, async (config) => brokenRuntime(await descriptor.create(background(), config), mode));
