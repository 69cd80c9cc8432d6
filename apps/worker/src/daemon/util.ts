/** Small helpers the daemon's parts share. */

/** An error's message, or the thrown value as text. */
export const errText = (e: unknown): string => (e instanceof Error ? e.message : String(e));

/** The Unix time in whole seconds (Vela's timestamps). */
export const nowSec = (): number => Math.floor(Date.now() / 1000);
