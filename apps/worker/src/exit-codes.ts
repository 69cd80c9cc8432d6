/** Exit statuses of the `berth` command. */
export const EXIT = {
  /** The build succeeded; the pipeline is valid. */
  ok: 0,
  /** The build failed (a step failed, was killed or errored); the pipeline has problems. */
  failed: 1,
  /** Bad usage or configuration: unknown flag, bad value, unreadable file. Nothing ran. */
  usage: 2,
  /** Interrupted (Ctrl-C) and cleaned up. */
  interrupted: 130,
} as const;

/** An error that ends the command with a message for the user and an exit status, never a stack trace. */
export class CommandError extends Error {
  override readonly name = 'CommandError';
  readonly exitCode: number;
  constructor(message: string, exitCode: number = EXIT.usage) {
    super(message);
    this.exitCode = exitCode;
  }
}
