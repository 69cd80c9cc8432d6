// Secrets as the worker fetches them (go-vela/server router/secret.go, api/secret/get.go
// GetSecret), and the defaults a created secret gets (api/secret/create.go CreateSecret).

import type { SimContext } from '../context.ts';
import { HttpError, type Router } from '../http.ts';
import type { VelaSecret } from '../types.ts';

/**
 * A secret with the defaults the server sets when it is created (S `api/secret/create.go`):
 * `allow_events` push, tag and deployment; `allow_command` and `allow_substitution` true, but
 * both false for a shared secret that does not set `allow_substitution`.
 */
export function withCreateDefaults(type: 'org' | 'repo' | 'shared', org: string, key: string, secret: VelaSecret): VelaSecret {
  // A shared secret that does not say about substitution allows neither it nor commands.
  const sharedDefaults = type === 'shared' && secret.allow_substitution === undefined;
  return {
    type,
    org,
    name: key,
    allow_events: { push: { branch: true, tag: true, delete_branch: false, delete_tag: false }, deployment: { created: true } },
    ...secret,
    allow_command: sharedDefaults ? false : (secret.allow_command ?? true),
    allow_substitution: sharedDefaults ? false : (secret.allow_substitution ?? true),
  };
}

/** Adds the secret route. */
export function secretRoutes(router: Router, ctx: SimContext): void {
  // server router/secret.go: secrets.GET("/*secret", secret.GetSecret) under
  // /secrets/:engine/:type/:org/:name — a catch-all, so a secret's name may contain slashes.
  router.route('GET', '/api/v1/secrets/:engine/:type/:org/:name/*key', ({ caller, params }) => {
    const path = `${params.engine}/${params.type}/${params.org}/${params.name}/${params.key}`;
    if (!['org', 'repo', 'shared'].includes(params.type!)) throw new HttpError(400, `invalid secret type: ${params.type}`);
    if (!caller.viaSecret && caller.claims.token_type !== 'WorkerBuild') {
      throw new HttpError(401, `invalid token type: ${caller.claims.token_type} (want WorkerBuild)`);
    }
    const s = ctx.state.secrets.get(path);
    if (!s) throw new HttpError(404, `unable to get secret ${path}: record not found`);
    if (caller.claims.token_type === 'WorkerBuild') {
      const [org, repo] = (caller.claims.repo ?? '/').split('/');
      if (params.type === 'org' && params.org !== org) throw new HttpError(401, `build token for ${caller.claims.repo} may not read org secret ${path}`);
      if (params.type === 'repo' && (params.org !== org || params.name !== repo))
        throw new HttpError(401, `build token for ${caller.claims.repo} may not read repo secret ${path}`);
      return { status: 200, body: s };
    }
    const { value: _value, ...sanitized } = s;
    return { status: 200, body: sanitized };
  });
}
