/**
 * The `berth` command as a library: `main(argv)` runs it and returns the exit status.
 */
export { createProgram, main } from './main.ts';
export { CommandError, EXIT } from './exit-codes.ts';
export type { Io } from './io.ts';
