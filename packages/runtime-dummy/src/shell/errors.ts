/**
 * How a process of the dummy's shell ends other than by returning: a signal, or `exit`.
 */

/** A process killed by a signal: thrown through the shell up to the killed process. */
export class Killed extends Error {
  override readonly name = 'Killed';
  readonly signalNumber: number;
  /** The process that was killed; undefined for the whole container. */
  readonly pid: number | undefined;
  constructor(signalNumber: number, pid?: number) {
    super(`killed by signal ${signalNumber}`);
    this.signalNumber = signalNumber;
    this.pid = pid;
  }
}

/** `exit N` (and a fatal expansion error): unwinds to the process boundary, which returns N. */
export class ShellExit extends Error {
  override readonly name = 'ShellExit';
  readonly code: number;
  constructor(code: number) {
    super(`exit ${code}`);
    this.code = code;
  }
}
