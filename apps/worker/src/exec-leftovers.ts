/**
 * What `berth exec` runs that died left on the engine (issue 25 item 6). Each run labels what it
 * creates with its worker id, `berth-exec-<host>-<pid>`; a run that is killed (`kill -9`) cannot
 * remove its containers, network and volume, and the next run in the same place would fail on
 * the network's name (409). So each `berth exec` (and `berth exec --cleanup`) first removes what
 * runs of this host whose process is gone left, and says what it removed.
 */
import os from 'node:os';
import type { Context } from '@berth/context';
import type { ReapReport, Runtime, RuntimeDescriptor } from '@berth/runtime';

const PREFIX = 'berth-exec-';
/** Longest host part kept in the id: the id is a label value (63 characters at most). */
const MAX_HOST_CHARS = 40;

/**
 * This host's name as it appears in an exec worker id (label characters only, at most 40):
 * `BERTH_EXEC_HOST` when set (runs that share one engine but should not clean up after each
 * other, such as test suites running side by side), else the machine's host name.
 */
export function execHost(hostname: string = process.env.BERTH_EXEC_HOST || os.hostname()): string {
  const clean = hostname
    .replace(/[^A-Za-z0-9_.]/g, '_')
    .slice(0, MAX_HOST_CHARS)
    .replace(/^[^A-Za-z0-9]+|[^A-Za-z0-9]+$/g, '');
  return clean || 'host';
}

/** The worker id of a `berth exec` run: `berth-exec-<host>-<pid>`. */
export function execWorkerId(pid: number = process.pid, host: string = execHost()): string {
  return `${PREFIX}${host}-${pid}`;
}

/**
 * The host and PID of an exec worker id; `host` is undefined for ids of earlier versions
 * (`berth-exec-<pid>`), which are taken as this host's. Undefined when it is no exec id.
 */
export function parseExecWorkerId(id: string): { host: string | undefined; pid: number } | undefined {
  if (!id.startsWith(PREFIX)) return undefined;
  const match = /^(?:(.+)-)?(\d+)$/.exec(id.slice(PREFIX.length));
  if (!match) return undefined;
  const pid = Number(match[2]);
  if (!Number.isSafeInteger(pid) || pid <= 0) return undefined;
  return { host: match[1], pid };
}

/** Whether a process with this PID exists (on this host): signal 0 probes without signalling. */
function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: it exists, as another user's.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** A runtime that can list the owners of what is on its engine (the Docker runtime's `owners`). */
interface OwnerListing {
  owners(ctx: Context, prefix: string): Promise<string[]>;
}

function listsOwners(runtime: Runtime): runtime is Runtime & OwnerListing {
  return typeof (runtime as Partial<OwnerListing>).owners === 'function';
}

/** What one dead run left and was removed. */
interface RemovedLeftovers {
  readonly owner: string;
  readonly pid: number;
  readonly report: ReapReport;
}

/**
 * Removes what dead `berth exec` runs of this host left: owners `berth-exec-<host>-<pid>` (or of
 * an earlier version, `berth-exec-<pid>`) whose process is gone and is not this one. Runtimes that
 * cannot list owners (only Docker can) are left alone. Rejects with the runtime's error.
 */
async function removeExecLeftovers(
  ctx: Context,
  runtime: Runtime,
  options: { host?: string; alive?: (pid: number) => boolean; self?: number } = {},
): Promise<RemovedLeftovers[]> {
  if (!listsOwners(runtime)) return [];
  const host = options.host ?? execHost();
  const alive = options.alive ?? processAlive;
  const self = options.self ?? process.pid;
  const removed: RemovedLeftovers[] = [];
  for (const owner of await runtime.owners(ctx, PREFIX)) {
    const parsed = parseExecWorkerId(owner);
    if (parsed === undefined || parsed.pid === self) continue;
    if (parsed.host !== undefined && parsed.host !== host) continue;
    if (alive(parsed.pid)) continue;
    const report = await runtime.reap(ctx, owner);
    if (report.containers.length + report.networks.length + report.volumes.length > 0) removed.push({ owner, pid: parsed.pid, report });
  }
  return removed;
}

/** One line per dead run: what was removed, for the user. */
function describeLeftovers(removed: readonly RemovedLeftovers[]): string {
  return removed
    .map(({ pid, report }) => {
      const parts = [
        report.containers.length > 0 ? `containers ${report.containers.join(', ')}` : '',
        report.networks.length > 0 ? `network${report.networks.length > 1 ? 's' : ''} ${report.networks.join(', ')}` : '',
        report.volumes.length > 0 ? `volume${report.volumes.length > 1 ? 's' : ''} ${report.volumes.join(', ')}` : '',
      ].filter(Boolean);
      return `berth: removed what an earlier berth exec (pid ${pid}, no longer running) left: ${parts.join('; ')}\n`;
    })
    .join('');
}

/** Removes dead runs' leftovers and tells `out`; a failure is told too, and does not stop the run. */
export async function cleanUpLeftovers(ctx: Context, runtime: Runtime, out: NodeJS.WritableStream): Promise<void> {
  try {
    out.write(describeLeftovers(await removeExecLeftovers(ctx, runtime)));
  } catch (error) {
    out.write(`berth: could not remove what earlier berth exec runs left: ${error instanceof Error ? error.message : String(error)}\n`);
  }
}

/** `berth exec --cleanup`: removes dead runs' leftovers, says so (or that there were none), and creates nothing. */
export async function cleanupOnly(descriptor: RuntimeDescriptor, ctx: Context, out: NodeJS.WritableStream): Promise<void> {
  const runtime = await descriptor.create(ctx, { workerId: execWorkerId() });
  try {
    const removed = await removeExecLeftovers(ctx, runtime);
    out.write(removed.length > 0 ? describeLeftovers(removed) : 'berth: nothing left by earlier berth exec runs\n');
  } finally {
    await runtime.close();
  }
}
