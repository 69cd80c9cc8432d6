/**
 * Loading a build's secrets from the Vela server, as go-vela/worker's `internal/secret` does.
 */
import type { Context } from '@berth/context';
import type { LoadedSecret, SecretLoader } from '@berth/executor';
import type { Container, Secret } from '@berth/pipeline';
import type { VelaClient } from '../vela/client.ts';
import { eventAllowed, eventNames } from '../vela/events.ts';
import type { VelaSecret } from '../vela/models.ts';

/** Where a secret lives on the server: `/api/v1/secrets/{engine}/{type}/{org}/{name}/{key}`. */
export interface SecretAddress {
  engine: string;
  type: 'org' | 'repo' | 'shared';
  org: string;
  /** `*` for org secrets, the repo for repo secrets, the team for shared ones. */
  name: string;
  key: string;
}

/**
 * Reads where a pipeline secret lives from its `key` and `type`, as Vela's `Secret.ParseOrg`,
 * `ParseRepo` and `ParseShared` do (S `compiler/types/pipeline/secret.go`, which go-vela/worker
 * `executor/linux/secret.go` pull calls before asking the server): `org/name`, `org/repo/name`,
 * `org/team/name`. The engine must be native or vault (any case), as there (ErrInvalidEngine):
 * another engine is never sent to the server. A repo secret must belong to the build's repo and
 * an org secret to its org; throws an Error saying why not.
 */
export function secretAddress(secret: Secret, repo: { org: string; name: string }): SecretAddress {
  const engine = secret.engine || 'native';
  const type = (secret.type || 'repo') as SecretAddress['type'];
  const parts = secret.key.split('/');
  const bad = (what: string): Error => new Error(`secret <${secret.name}>: ${what}`);
  if (!['native', 'vault'].includes(engine.toLowerCase())) {
    throw bad(`invalid secret engine ${JSON.stringify(engine)}: Vela's secret engines are native and vault; fix the secret's engine in the pipeline`);
  }
  switch (type) {
    case 'org': {
      if (parts.length < 2 || !parts[0] || !parts.slice(1).join('/')) throw bad(`org secret key ${JSON.stringify(secret.key)} is not org/name`);
      if (parts[0] !== repo.org) throw bad(`org secret of ${parts[0]} is not available to a build of ${repo.org}/${repo.name}`);
      return { engine, type, org: parts[0], name: '*', key: parts.slice(1).join('/') };
    }
    case 'repo': {
      if (parts.length < 3 || !parts[0] || !parts[1] || !parts.slice(2).join('/'))
        throw bad(`repo secret key ${JSON.stringify(secret.key)} is not org/repo/name`);
      if (parts[0] !== repo.org || parts[1] !== repo.name)
        throw bad(`repo secret of ${parts[0]}/${parts[1]} is not available to a build of ${repo.org}/${repo.name}`);
      return { engine, type, org: parts[0], name: parts[1], key: parts.slice(2).join('/') };
    }
    case 'shared': {
      if (parts.length < 3 || !parts[0] || !parts[1] || !parts.slice(2).join('/'))
        throw bad(`shared secret key ${JSON.stringify(secret.key)} is not org/team/name`);
      return { engine, type, org: parts[0], name: parts[1], key: parts.slice(2).join('/') };
    }
    default:
      throw bad(`unknown secret type ${JSON.stringify(secret.type)} (org, repo or shared)`);
  }
}

/**
 * Why a Vela secret must not go into `container`, as Vela's `Secret.Match` decides; undefined
 * when it may. `allow_command` unset counts as false and `allow_events` unset allows nothing, as
 * in Vela (the server sets both when a secret is created).
 */
export function velaSecretDenial(secret: VelaSecret, container: Container): string | undefined {
  if (secret.allow_command !== true) {
    if (container.commands.length > 0) return 'it does not allow commands (allow_command is false) and this container has commands';
    if (container.entrypoint.length > 0) return 'it does not allow commands (allow_command is false) and this container sets its own entrypoint';
  }
  const event = container.environment['VELA_BUILD_EVENT'] ?? '';
  const action = container.environment['VELA_BUILD_EVENT_ACTION'] ?? '';
  if (!eventAllowed(secret.allow_events, event, action)) {
    const name = action === '' ? event : `${event}:${action}`;
    const events = eventNames(secret.allow_events);
    return `it is not allowed for ${name || 'this'} builds (allow_events: ${events.length > 0 ? events.join(', ') : 'none'})`;
  }
  const images = secret.images ?? [];
  if (images.length > 0 && !images.some((image) => image !== '' && container.image.startsWith(image))) {
    return `it is restricted to the images ${images.filter((image) => image !== '').join(', ') || '(none)'}, and this container runs ${container.image}`;
  }
  return undefined;
}

/**
 * A {@link SecretLoader} that fetches each secret with the build token, with Vela's restrictions:
 * it is injected only where {@link velaSecretDenial} allows, and substituted into `${NAME}` only
 * when `allow_substitution` is true. Gotcha: the value is never logged; an error names the
 * secret, never its value.
 */
export function velaSecretLoader(client: VelaClient, repo: { org: string; name: string }): SecretLoader {
  return async (ctx: Context, secret: Secret): Promise<LoadedSecret> => {
    const a = secretAddress(secret, repo);
    const s = await client.getSecret(ctx, a.engine, a.type, a.org, a.name, a.key);
    if (typeof s?.value !== 'string') throw new Error(`secret <${secret.name}>: the server sent no value (is the token a build token?)`);
    return { value: s.value, substitution: s.allow_substitution === true, deniedFor: (container) => velaSecretDenial(s, container) };
  };
}
