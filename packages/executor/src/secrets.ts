/**
 * Putting loaded secrets into containers as Vela's worker does: a secret may be restricted (to
 * some images, events, or to containers without commands), and a secret that does not allow
 * substitution is injected only after `${NAME}` in the container's fields has been substituted.
 */
import type { Context } from '@berth/context';
import { type Container, envsubst, type Secret, SubstitutionError } from '@berth/pipeline';

/** A loaded secret: its value and where it may go. */
export interface LoadedSecret {
  value: string;
  /**
   * Whether `${NAME}` in a container's fields may be replaced by this secret's value (Vela's
   * `allow_substitution`). Default true. When false the secret is set only in the environment,
   * after substitution, so the value can reach the container only as an environment variable.
   */
  substitution?: boolean;
  /**
   * Why the secret must not be injected into `container` (Vela's `images`, `allow_events` and
   * `allow_command`); undefined when it may. Default: allowed everywhere.
   */
  deniedFor?(container: Container): string | undefined;
}

/**
 * Loads a secret (from a Vela server, a file, the environment…): its value alone, which may go
 * into every container that asks for it, or a {@link LoadedSecret} with restrictions.
 */
export type SecretLoader = (ctx: Context, secret: Secret) => Promise<string | LoadedSecret>;

/** A loader's answer as a {@link LoadedSecret}. */
export function toLoadedSecret(loaded: string | LoadedSecret): LoadedSecret {
  return typeof loaded === 'string' ? { value: loaded } : loaded;
}

/** Which of the loaded secrets {@link injectSecrets} sets. */
export type SecretSet = 'substitutable' | 'protected' | 'all';

/**
 * Sets the container's environment targets of the secrets it asks for that are loaded, in `set`,
 * and allowed for it. Returns one line for each secret withheld, saying why (never the value).
 */
export function injectSecrets(container: Container, secrets: ReadonlyMap<string, LoadedSecret>, set: SecretSet): string[] {
  const withheld: string[] = [];
  for (const ref of container.secrets) {
    const secret = secrets.get(ref.source);
    if (secret === undefined || ref.target === '') continue;
    const substitutable = secret.substitution !== false;
    if ((set === 'substitutable' && !substitutable) || (set === 'protected' && substitutable)) continue;
    const denied = secret.deniedFor?.(container);
    if (denied !== undefined) {
      withheld.push(`secret <${ref.source}> was not set as ${ref.target}: ${denied}`);
      continue;
    }
    container.environment[ref.target] = secret.value;
  }
  return withheld;
}

/**
 * Vela's `Container.Substitute` at run time: every `${NAME}` in the container's string fields
 * (image, entrypoint, commands, environment values, ruleset, …) becomes the container's
 * environment variable NAME, or nothing when it has none. Map keys are kept. Throws an Error that
 * names the field (never its value) when a field cannot be substituted (`${` without `}`).
 *
 * Gotcha: run it after the commands became the build script (the script is base64 in the
 * environment, so commands are not substituted twice), and before protected secrets are set.
 */
export function substituteContainer(container: Container): void {
  const env = { ...container.environment };
  const lookup = (name: string): string => env[name] ?? '';
  const visit = (value: unknown, path: string): unknown => {
    if (typeof value === 'string') {
      if (!value.includes('$')) return value;
      try {
        return envsubst(value, lookup);
      } catch (error) {
        if (error instanceof SubstitutionError) {
          // No `cause`: its message quotes the value, which may be a secret.
          // eslint-disable-next-line preserve-caught-error
          throw new Error(
            `unable to substitute ${path} of ${container.name}: a "\${" without a closing "}" (write a literal "\${" as "$\${"; a secret whose value has one must not allow substitution)`,
          );
        }
        throw error;
      }
    }
    if (Array.isArray(value)) {
      for (let i = 0; i < value.length; i++) value[i] = visit(value[i], `${path}[${i}]`);
      return value;
    }
    if (value !== null && typeof value === 'object' && Object.getPrototypeOf(value) === Object.prototype) {
      const object = value as Record<string, unknown>;
      for (const key of Object.keys(object)) object[key] = visit(object[key], path === '' ? key : `${path}.${key}`);
      return object;
    }
    return value;
  };
  visit(container, '');
}
