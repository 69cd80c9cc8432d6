/**
 * The executor's own error: which phase of which build failed, and why.
 */

/** The lifecycle phases of a build, in order. */
export type Phase = 'create' | 'plan' | 'assemble' | 'exec' | 'stream' | 'destroy';

/**
 * Why a phase failed, in words for the user: `[berth] exec step "test": <what happened>`.
 * `cause` is the underlying error (often a `RuntimeError`).
 */
export class ExecutorError extends Error {
  override readonly name = 'ExecutorError';
  readonly phase: Phase;
  /** The message without the `[berth] phase subject:` prefix. */
  readonly detail: string;

  constructor(phase: Phase, subject: string, detail: string, options?: ErrorOptions) {
    super(`[berth] ${phase}${subject === '' ? '' : ` ${subject}`}: ${detail}`, options);
    this.phase = phase;
    this.detail = detail;
  }
}

/** The message of any thrown value. */
export function messageOf(error: unknown): string {
  if (error instanceof Error) return error.message;
  return String(error);
}
