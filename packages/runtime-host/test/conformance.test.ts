// The shared Runtime conformance suite against the host runtime, with the skips it declares (its
// `conformance` export, which `berth runtimes verify host` uses too).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll } from 'vitest';
import { runtimeConformance } from '@berth/runtime-conformance';
import { conformance, hostRuntime } from '../src/index.ts';

// The builds live in a root of this file's own, removed at its end: each case is a worker of its
// own, and the runtime keeps a worker's (emptied) directory, which under the default root
// (<tmpdir>/berth-host) piled up, one per case and run.
const root = mkdtempSync(path.join(tmpdir(), 'berth-host-conformance-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

runtimeConformance('host', hostRuntime({ root, warn: () => undefined }), conformance);
