/**
 * Where `berth start` keeps its state (the running-builds file with build tokens) when
 * `--state-dir` is not set: a durable directory, so that a restarted worker (or a rebooted
 * machine, which empties /tmp) still reports the builds it lost.
 */
import { homedir } from 'node:os';
import path from 'node:path';

/** The directory's name under the parents below. */
const STATE_DIR_NAME = 'berth-worker';

/**
 * The default state directory, first that applies:
 * 1. `$STATE_DIRECTORY` (systemd's `StateDirectory=`; the first of a colon-separated list);
 * 2. `/var/lib/berth-worker` when running as root (the FHS place for a service's state);
 * 3. `$XDG_STATE_HOME/berth-worker`, else `~/.local/state/berth-worker` (XDG Base Directory spec).
 */
export function defaultStateDir(env: Record<string, string | undefined>, uid: number | undefined = process.getuid?.(), home: () => string = homedir): string {
  const systemd = env.STATE_DIRECTORY?.split(':')[0];
  if (systemd) return systemd;
  if (uid === 0) return path.join('/var/lib', STATE_DIR_NAME);
  const xdg = env.XDG_STATE_HOME;
  // The spec says a relative XDG path is invalid and must be ignored.
  if (xdg && path.isAbsolute(xdg)) return path.join(xdg, STATE_DIR_NAME);
  return path.join(home(), '.local', 'state', STATE_DIR_NAME);
}
