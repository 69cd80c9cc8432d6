import path from 'node:path';
import type { Volume } from '@berth/pipeline';

/** One entry of the operator's volume allowlist (`src:dst[:ro|rw]`). */
export interface AllowedVolume {
  /** Host path, absolute and normalised. */
  source: string;
  /** Default path in the container, when the step names only the source. */
  destination: string;
  /** True only when the entry says `rw`. */
  writable: boolean;
}

/** A bind mount as the engine receives it in `HostConfig.Mounts`. */
export interface BindMount {
  Type: 'bind';
  Source: string;
  Target: string;
  ReadOnly: boolean;
}

/**
 * Parses the operator's allowlist, Vela's `VELA_RUNTIME_VOLUMES` format: `src`, `src:dst` or
 * `src:dst:ro|rw`; read-only unless `rw`. Throws a TypeError naming the bad entry.
 */
export function parseVolumeAllowlist(entries: readonly string[]): AllowedVolume[] {
  return entries.map((entry) => {
    const parts = entry.split(':');
    if (parts.length > 3 || parts.some((part) => part === '')) {
      throw new TypeError(`volume ${JSON.stringify(entry)} is not src[:dst[:ro|rw]]`);
    }
    const [source = '', destination = source, mode = 'ro'] = parts;
    if (mode !== 'ro' && mode !== 'rw') throw new TypeError(`volume ${JSON.stringify(entry)} has access mode ${JSON.stringify(mode)}; use ro or rw`);
    if (!path.posix.isAbsolute(source) || !path.posix.isAbsolute(destination)) {
      throw new TypeError(`volume ${JSON.stringify(entry)} must use absolute paths`);
    }
    return { source: normalise(source), destination: normalise(destination), writable: mode === 'rw' };
  });
}

/**
 * The bind mounts a container gets for the volumes it asks for. A volume is allowed when its
 * source is an allowlisted source or lies below one; it is mounted at the destination the step
 * names (the entry's destination when it names none), read-write only when the entry says `rw`
 * and the step does not ask for `ro`.
 *
 * Returns the refused volumes separately: the runtime turns them into an `InvalidConfig` error.
 */
export function resolveBindMounts(requested: readonly Volume[], allowlist: readonly AllowedVolume[]): { mounts: BindMount[]; refused: Volume[] } {
  const mounts: BindMount[] = [];
  const refused: Volume[] = [];
  for (const volume of requested) {
    const source = volume.source && path.posix.isAbsolute(volume.source) ? normalise(volume.source) : undefined;
    const entry =
      source === undefined
        ? undefined
        : allowlist.find((allowed) => source === allowed.source || source.startsWith(`${allowed.source === '/' ? '' : allowed.source}/`));
    if (!entry || source === undefined) {
      refused.push(volume);
      continue;
    }
    const destination = volume.destination ? volume.destination : entry.destination;
    if (!path.posix.isAbsolute(destination)) {
      refused.push(volume);
      continue;
    }
    const askedReadOnly = volume.access_mode === 'ro';
    mounts.push({ Type: 'bind', Source: source, Target: normalise(destination), ReadOnly: askedReadOnly || !entry.writable });
  }
  return { mounts, refused };
}

function normalise(p: string): string {
  const clean = path.posix.normalize(p);
  return clean.length > 1 && clean.endsWith('/') ? clean.slice(0, -1) : clean;
}
