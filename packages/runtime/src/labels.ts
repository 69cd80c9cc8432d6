/** Label keys every runtime puts on what it creates, so builds can be found, removed and reaped. */
export const LABELS = {
  /** The id of the worker that created the resource. */
  worker: 'berth.dev/worker',
  /** The (sanitized) id of the build the resource belongs to. */
  build: 'berth.dev/build',
  /** The container's id within the build, on containers. */
  container: 'berth.dev/container',
} as const;

/** A label value as Kubernetes and Docker both accept it: at most 63 of `[A-Za-z0-9_.-]`, alphanumeric at both ends. */
export function labelValue(value: string): string {
  let clean = value.replace(/[^A-Za-z0-9_.-]/g, '-');
  if (clean.length > 63) {
    clean = `${clean.slice(0, 54)}-${shortHash(value)}`;
  }
  return clean.replace(/^[^A-Za-z0-9]+/, '').replace(/[^A-Za-z0-9]+$/, '');
}

/** The labels of a resource created by `workerId` for `buildId` (and `containerId`, on containers). */
export function resourceLabels(workerId: string, buildId: string, containerId?: string): Record<string, string> {
  const labels: Record<string, string> = { [LABELS.worker]: labelValue(workerId), [LABELS.build]: labelValue(buildId) };
  if (containerId !== undefined) labels[LABELS.container] = labelValue(containerId);
  return labels;
}

function shortHash(text: string): string {
  // FNV-1a, 32 bits: short, stable, no dependency.
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash.toString(36).padStart(7, '0');
}
