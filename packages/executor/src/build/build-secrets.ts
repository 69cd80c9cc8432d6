/**
 * One build's secrets once loaded, and every value its logs and errors must not show: the
 * secrets, the masked outputs, and the credentials the executor set in containers.
 */
import type { Context } from '@berth/context';
import type { Container, Secret } from '@berth/pipeline';
import { type LoadedSecret, type SecretLoader, toLoadedSecret } from '../secrets.ts';
import { credentialsOf, maskSecrets } from './environment.ts';

/** Where {@link BuildSecrets} gets values and tells of new ones. */
export interface BuildSecretsOptions {
  /** Loads a secret's value; default: the secret's `value` as given. */
  loader?: SecretLoader | undefined;
  /** The values of masked outputs so far (they are masked as secrets are). */
  maskedOutputs: () => readonly string[];
  /** Called with each value loaded, so the log writers already open mask it too. */
  onLoaded: (value: string) => void;
}

/** The loaded secrets of one build, by name. */
export class BuildSecrets {
  readonly #loaded = new Map<string, LoadedSecret>();
  readonly #options: BuildSecretsOptions;

  constructor(options: BuildSecretsOptions) {
    this.#options = options;
  }

  /** The secrets loaded so far, by name. */
  get loaded(): ReadonlyMap<string, LoadedSecret> {
    return this.#loaded;
  }

  /** Loads `secret` (again, when loaded before: a lazy secret is loaded by each step that needs it). */
  async load(ctx: Context, secret: Secret): Promise<void> {
    const loader = this.#options.loader;
    const loaded = toLoadedSecret(loader === undefined ? secret.value : await loader(ctx, secret));
    this.#loaded.set(secret.name, loaded);
    this.#options.onLoaded(loaded.value);
  }

  /** Every secret value loaded so far, and the masked outputs. */
  values(): string[] {
    return [...[...this.#loaded.values()].map((secret) => secret.value), ...this.#options.maskedOutputs()];
  }

  /** Every value masked in this container's log: the build's secrets and the container's credentials. */
  valuesFor(container: Container): string[] {
    return [...this.values(), ...credentialsOf(container)];
  }

  /**
   * `text` (an error or a message the executor builds) with every form of every secret loaded so
   * far and of every credential set in `containers` (VELA_NETRC_PASSWORD, tokens) masked.
   */
  mask(text: string, containers: Iterable<Container>): string {
    return maskSecrets(text, this.values(), containers);
  }
}
