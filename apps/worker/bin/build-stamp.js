// The worker's build script runs this after `tsc`: it marks dist/ as complete, so `berth` runs
// the compiled JavaScript until a source file changes (bin/entry.js).
import { writeBuildStamp } from './entry.js';

writeBuildStamp(new URL('..', import.meta.url).pathname);
