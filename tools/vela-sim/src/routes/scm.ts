// SCM tokens a build gets (go-vela/server): the install token its executable carries
// (api/build/compile_publish.go, scm/github/repo.go GetNetrcPassword), refreshing and minting
// install tokens (api/build/refresh_install.go, post_install.go; cached as
// cache/redis/store_install.go does) and the ID-request token (api/build/id_request_token.go).

import { randomBytes } from 'node:crypto';
import { now, requireBuildAccess } from '../auth.ts';
import { BUILD as B, type SimContext, buildTokenTtl } from '../context.ts';
import { HttpError, type Router, asObject } from '../http.ts';
import type { InstallTokenRecord } from '../state.ts';
import type { VelaBuild, VelaRepo } from '../types.ts';

/** Server scm/github/repo.go GetNetrcPassword, as the sim models it. */
export function netrcPassword(ctx: SimContext, build: VelaBuild, repo: VelaRepo): { token: string; expiration: number } {
  const installId = typeof repo.install_id === 'number' ? repo.install_id : 0;
  if (installId === 0) return { token: `gho_owner_${randomBytes(12).toString('hex')}`, expiration: 0 };
  return mintInstallToken(ctx, build.id!, [repo.name ?? ''], { contents: 'read' });
}

/** Mints and caches an install token (server cache/redis/store_install.go StoreInstallToken). */
function mintInstallToken(ctx: SimContext, buildId: number, repositories: string[], permissions: Record<string, string>): InstallTokenRecord {
  const rec: InstallTokenRecord = {
    token: `ghs_${randomBytes(16).toString('hex')}`,
    buildId,
    expiration: now() + (ctx.options.installTokenTtlSec ?? 3600),
    repositories,
    permissions,
  };
  ctx.state.installTokens.set(rec.token, rec);
  ctx.state.installTokenLog.push(rec);
  return rec;
}

/** Adds the install-token and ID-request-token routes. */
export function scmRoutes(router: Router, ctx: SimContext): void {
  const { state } = ctx;

  // Server api/build/refresh_install.go RefreshInstallToken (router/build.go: MustBuildAccess).
  router.route('GET', `${B}/install_token`, ({ caller, params, headers }) => {
    const b = state.buildOf(params);
    requireBuildAccess(caller, b);
    if (b.status !== 'running' && b.status !== 'pending')
      throw new HttpError(400, 'unable to generate install token for build not in running or pending status');
    const current = typeof headers.token === 'string' ? headers.token : '';
    if (current === '') throw new HttpError(401, 'unable to retrieve installation token from request header');
    const cached = state.installTokens.get(current);
    if (!cached) throw new HttpError(401, 'unable to get installation token from cache: redis: nil');
    state.installTokens.delete(current);
    const fresh = mintInstallToken(ctx, b.id!, cached.repositories, cached.permissions);
    return { status: 200, body: { token: fresh.token, expiration: fresh.expiration } };
  });

  // Server api/build/post_install.go PostInstallToken (router/build.go: MustBuildAccess).
  router.route('POST', `${B}/install_token`, ({ caller, params, body }) => {
    const b = state.buildOf(params);
    requireBuildAccess(caller, b);
    if (!(typeof b.repo?.install_id === 'number' && b.repo.install_id !== 0))
      throw new HttpError(400, 'repository does not have an installation ID, cannot generate install token');
    if (b.status !== 'running') throw new HttpError(400, 'unable to generate install token for build not in running status');
    const input = asObject(body);
    const repositories = Array.isArray(input.repositories) ? input.repositories.filter((r): r is string => typeof r === 'string') : [];
    const permissions = input.permissions && typeof input.permissions === 'object' ? (input.permissions as Record<string, string>) : {};
    const t = mintInstallToken(ctx, b.id!, repositories, permissions);
    return { status: 200, body: { token: t.token, expiration: t.expiration } };
  });

  // Server api/build/id_request_token.go GetIDRequestToken (router/build.go: MustBuildAccess).
  router.route('GET', `${B}/id_request_token`, ({ caller, params, query }) => {
    const b = state.buildOf(params);
    requireBuildAccess(caller, b);
    const image = query.get('image') ?? '';
    if (image === '') throw new HttpError(400, "no step 'image' provided in query parameters");
    const request = query.get('request') ?? '';
    if (request === '') throw new HttpError(400, "no 'request' provided in query parameters");
    const commands = query.get('commands') ?? '';
    if (commands !== '' && !['true', 'false', '1', '0', 't', 'f', 'TRUE', 'FALSE', 'True', 'False', 'T', 'F'].includes(commands)) {
      throw new HttpError(400, `unable to parse 'commands' query parameter as boolean ${commands}`);
    }
    return {
      status: 200,
      body: { token: ctx.tokens.mint('IDRequest', caller.claims.sub, buildTokenTtl(ctx, b), { build_id: b.id!, repo: b.repo!.full_name! }) },
    };
  });
}
