/** The build as a whole (go-vela/worker runtime/docker/build.go), and the worker's reaping by label. */
import type { Context } from '@berth/context';
import type { Build } from '@berth/pipeline';
import { LABELS, labelValue, type ReapReport } from '@berth/runtime';
import { engineName, outputsVolumeName } from './container-spec.ts';
import { contextError } from './errors.ts';
import type { RuntimeState } from './state.ts';

/** The build's containers, network and volume, as the init log shows them (`Runtime.inspectBuild`). */
export async function inspectBuild(s: RuntimeState, ctx: Context, build: Build): Promise<string> {
  const where = { operation: 'inspectBuild', subject: build.id };
  const containers = await s.call(ctx, where, (signal) =>
    s.docker.listContainers({ all: true, filters: { label: s.buildFilter(build.id) }, abortSignal: signal }),
  );
  const lines = [`$ docker ps -a --filter label=${LABELS.build}=${labelValue(build.id)}`];
  lines.push(`network ${engineName(build.id)}, volume ${engineName(build.id)} mounted at ${s.workspacePath}`);
  for (const c of containers) lines.push(`${c.Names[0]?.replace(/^\//, '') ?? c.Id} ${c.Image} ${c.State}`);
  return `${lines.join('\n')}\n`;
}

/** Nothing precedes containers on Docker (Vela: a no-op); honours a done ctx (`Runtime.setupBuild`). */
export async function setupBuild(s: RuntimeState, ctx: Context, build: Build): Promise<void> {
  // Nothing precedes containers on Docker (Vela: a no-op); still honour a done ctx.
  if (ctx.signal.aborted) throw contextError(ctx, { operation: 'setupBuild', subject: build.id });
  return Promise.resolve();
}

/** Nothing to assemble on Docker; honours a done ctx (`Runtime.assembleBuild`). */
export async function assembleBuild(s: RuntimeState, ctx: Context, build: Build): Promise<void> {
  if (ctx.signal.aborted) throw contextError(ctx, { operation: 'assembleBuild', subject: build.id });
  return Promise.resolve();
}

/** Removes the build's containers (by label), network and volumes, after its pending creations (`Runtime.removeBuild`). */
export async function removeBuild(s: RuntimeState, ctx: Context, build: Build): Promise<void> {
  const where = { operation: 'removeBuild', subject: build.id };
  await s.creationsSettled(ctx, build.id);
  const containers = await s.call(ctx, where, (signal) =>
    s.docker.listContainers({ all: true, filters: { label: s.buildFilter(build.id) }, abortSignal: signal }),
  );
  for (const c of containers) await s.forceRemoveContainer(ctx, where, c.Id);
  for (const [id, record] of s.containers) {
    if (record.buildId === build.id) s.forget(id);
  }
  await s.removeNetworkNamed(ctx, where, engineName(build.id));
  await s.removeVolumeNamed(ctx, where, engineName(build.id));
  await s.removeVolumeNamed(ctx, where, outputsVolumeName(build.id));
  s.networks.delete(build.id);
  s.volumes.delete(build.id);
  s.outputs.delete(build.id);
}

/**
 * The worker ids (`berth.dev/worker` label values) on the engine's containers, networks and
 * volumes that start with `prefix`, each once: the owners a caller may {@link reap}, e.g.
 * `berth exec` runs that died (`berth-exec-`).
 */
export async function owners(s: RuntimeState, ctx: Context, prefix: string): Promise<string[]> {
  const where = { operation: 'owners', subject: prefix };
  const filters = { label: [LABELS.worker] };
  const [containers, networks, volumes] = await Promise.all([
    s.call(ctx, where, (signal) => s.docker.listContainers({ all: true, filters, abortSignal: signal })),
    s.call(ctx, where, (signal) => s.docker.listNetworks({ filters, abortSignal: signal })),
    s.call(ctx, where, (signal) => s.docker.listVolumes({ filters, abortSignal: signal })),
  ]);
  const found = new Set<string>();
  for (const labels of [...containers.map((c) => c.Labels), ...networks.map((n) => n.Labels), ...(volumes.Volumes ?? []).map((v) => v.Labels)]) {
    const owner = labels?.[LABELS.worker];
    if (owner !== undefined && owner.startsWith(prefix)) found.add(owner);
  }
  return [...found].sort();
}

/** Removes every build of worker `owner` not in `keep`, by label (`Runtime.reap`). */
export async function reap(s: RuntimeState, ctx: Context, owner: string, keep: ReadonlySet<string> = new Set()): Promise<ReapReport> {
  const where = { operation: 'reap', subject: owner };
  const kept = new Set([...keep].map((id) => labelValue(id)));
  const filters = { label: [`${LABELS.worker}=${labelValue(owner)}`] };
  const reaped = (labels: Record<string, string> | null | undefined): boolean => !kept.has(labels?.[LABELS.build] ?? '');
  const report: ReapReport = { containers: [], networks: [], volumes: [], pods: [] };

  const containers = await s.call(ctx, where, (signal) => s.docker.listContainers({ all: true, filters, abortSignal: signal }));
  for (const c of containers.filter((c) => reaped(c.Labels))) {
    await s.forceRemoveContainer(ctx, where, c.Id);
    report.containers.push(c.Names[0]?.replace(/^\//, '') ?? c.Id);
  }
  const networks = await s.call(ctx, where, (signal) => s.docker.listNetworks({ filters, abortSignal: signal }));
  for (const n of networks.filter((n) => reaped(n.Labels))) {
    await s.removeNetworkNamed(ctx, where, n.Id);
    report.networks.push(n.Name);
  }
  const volumes = await s.call(ctx, where, (signal) => s.docker.listVolumes({ filters, abortSignal: signal }));
  for (const v of (volumes.Volumes ?? []).filter((v) => reaped(v.Labels))) {
    await s.removeVolumeNamed(ctx, where, v.Name);
    report.volumes.push(v.Name);
  }
  return report;
}
