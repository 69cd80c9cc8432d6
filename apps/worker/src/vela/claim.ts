/**
 * Claiming a popped build: the build token, then the executable (steps 5 and 6 of a build slot in
 * go-vela/worker's exec.go).
 */
import { type Context } from '@berth/context';
import { VelaApiError, type VelaClient, isVelaStatus } from './client.ts';
import type { VelaExecutable } from './models.ts';
import type { QueueItem } from './queue.ts';

/**
 * What claiming gave:
 * - `claimed`: run it; `client` carries the build token.
 * - `not-pending`: 409 on the build token: the build was cancelled (or taken) while queued. Drop the item.
 * - `unknown-build`: 404: the server has no such repo or build. Drop the item.
 * - `failed`: anything else after retries (server down, executable lost). `stage` says which call.
 */
export type ClaimResult =
  | { kind: 'claimed'; buildToken: string; client: VelaClient; executable: VelaExecutable; pipeline: unknown }
  | { kind: 'not-pending'; error: VelaApiError }
  | { kind: 'unknown-build'; error: VelaApiError }
  | { kind: 'failed'; stage: 'token'; error: Error }
  /** `buildToken`: report the failure with it (the build PUT needs a build token). */
  | { kind: 'failed'; stage: 'executable'; buildToken: string; error: Error };

/** Gets the build token with the worker's client, then the executable with the build token. */
export async function claimBuild(ctx: Context, workerClient: VelaClient, item: QueueItem): Promise<ClaimResult> {
  const { org, name } = item.build.repo;
  let buildToken: string;
  try {
    buildToken = await workerClient.buildToken(ctx, org, name, item.build.number);
  } catch (e) {
    if (isVelaStatus(e, 409)) return { kind: 'not-pending', error: e };
    if (isVelaStatus(e, 404)) return { kind: 'unknown-build', error: e };
    if (e instanceof VelaApiError) return { kind: 'failed', stage: 'token', error: e };
    throw e;
  }
  const client = workerClient.withToken(buildToken);
  try {
    const { executable, pipeline } = await client.getExecutable(ctx, org, name, item.build.number);
    return { kind: 'claimed', buildToken, client, executable, pipeline };
  } catch (e) {
    if (e instanceof VelaApiError) return { kind: 'failed', stage: 'executable', buildToken, error: e };
    throw e;
  }
}
