import path from 'node:path';
import { labelValue } from '@berth/runtime';

/** Where one build lives on the host: `<root>/<worker>/<build>/`. */
export interface BuildLayout {
  /** The build's own directory; removed with the build. */
  dir: string;
  /** The workspace steps run in (the build directory's `workspace`, or `workspaceHostPath`). */
  workspace: string;
  /** `HOME` of the build's steps, so that tools' caches and dotfiles stay in the build. */
  home: string;
  /** Each step's combined output, `<container id>.log`. */
  logs: string;
  /** Each running step's process group id, `<container id>.pid`, for {@link reap}. */
  pids: string;
}

/** The directory of a worker's builds under `root`. */
export function workerDir(root: string, workerId: string): string {
  return path.join(root, labelValue(workerId) || 'worker');
}

/** Where `buildId` of `workerId` lives under `root`; `workspaceHostPath` replaces its workspace. */
export function buildLayout(root: string, workerId: string, buildId: string, workspaceHostPath?: string): BuildLayout {
  const dir = path.join(workerDir(root, workerId), labelValue(buildId) || 'build');
  return {
    dir,
    workspace: workspaceHostPath ?? path.join(dir, 'workspace'),
    home: path.join(dir, 'home'),
    logs: path.join(dir, 'logs'),
    pids: path.join(dir, 'pids'),
  };
}

/**
 * The host directory a step's `directory` names. Steps see the workspace as `workspacePath`
 * (`/vela`) in every other runtime; here that prefix maps onto the build's workspace, as
 * Woodpecker's local backend runs steps in its per-workflow `workspace` directory
 * (woodpecker-ci/woodpecker pipeline/backend/local/local.go, `Setup` and `execCommands`).
 * An empty `directory` is the workspace itself. Returns `undefined` for a directory outside
 * the workspace (or one that climbs out of it with `..`): the host runtime runs nothing elsewhere.
 */
export function hostDirectory(directory: string, workspacePath: string, workspace: string): string | undefined {
  if (directory === '') return workspace;
  const inside = mapWorkspacePath(directory, workspacePath, workspace);
  if (inside === undefined) return undefined;
  const relative = path.relative(workspace, inside);
  return relative.startsWith('..') || path.isAbsolute(relative) ? undefined : inside;
}

/** `value` with a leading `workspacePath` replaced by `workspace`, or `undefined` when it does not start with it. */
export function mapWorkspacePath(value: string, workspacePath: string, workspace: string): string | undefined {
  const base = workspacePath.replace(/\/+$/, '') || '/';
  if (value === base) return workspace;
  if (value.startsWith(`${base}/`)) return path.join(workspace, value.slice(base.length + 1));
  return undefined;
}
