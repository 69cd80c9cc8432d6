/**
 * The SCM credentials and ID-request tokens Vela's worker puts into each container.
 *
 * go-vela/worker `executor/linux/build.go` UpdateSCMAuth (called for every service and every
 * non-init step by ExecBuild): the executable's `token` (the SCM install token the server minted in
 * `api/build/compile_publish.go`) becomes `VELA_NETRC_PASSWORD` and `VELA_GIT_TOKEN`, its
 * `token_exp` `VELA_GIT_TOKEN_EXPIRATION`; when fewer than 45 minutes of it remain it is refreshed
 * with `GET …/install_token` (header `Token: <current>`); a container with `git.token.repositories`
 * gets its own token from `POST …/install_token`. `executor/linux/step.go` CreateStep and
 * `internal/step/environment.go`: a step with `id_request` gets `VELA_ID_TOKEN_REQUEST_TOKEN` from
 * `GET …/id_request_token`, and every step `VELA_ID_TOKEN_REQUEST_URL`.
 *
 * Difference, on purpose: Berth's executor lays a container's environment when it assembles the
 * build, so the calls are made once, when the build is running (the POST needs a running build),
 * before assembling; Go makes them just before each container runs. A build longer than the token's
 * remaining life (≥ 45 min after the refresh) can outlive the token, as a Go step that runs longer
 * than 45 minutes does.
 */
import type { Context } from '@berth/context';
import type { Reporter } from '@berth/executor';
import { allContainers, type Build, type Container } from '@berth/pipeline';
import type { VelaClient } from '../vela/client.ts';
import { errText, nowSec } from './util.ts';

/** Go refreshes the install token when fewer than this many seconds remain (`build.go` UpdateSCMAuth). */
const SCM_REFRESH_WINDOW_SEC = 45 * 60;

/** What {@link ScmAuth} needs of the build. */
export interface ScmAuthOptions {
  /** A client holding the build token. */
  client: VelaClient;
  org: string;
  repo: string;
  number: number;
  /** The compiled pipeline (`token`, `token_exp`, the containers). */
  build: Build;
  /** The server address containers reach (their `VELA_SERVER_ADDR`), for the ID-token URL. */
  serverAddr: string;
  nowSec?: () => number;
  logger?: { info(obj: object, msg: string): void };
}

interface Granted {
  token: string;
  expiration: number;
}

/**
 * The SCM token of one build and the per-container tokens; {@link reporter} fetches them when the
 * build turns running and {@link environment} hands them to each container.
 */
export class ScmAuth {
  readonly #o: ScmAuthOptions;
  #token: string;
  #expiration: number;
  /** Container id → its `git.token` install token, or why it could not be had. */
  readonly #scoped = new Map<string, Granted | Error>();
  /** Container id → its ID request token, or why it could not be had. */
  readonly #idRequest = new Map<string, string | Error>();
  readonly #services: Set<string>;
  #prepared: Promise<void> | undefined;

  constructor(options: ScmAuthOptions) {
    this.#o = options;
    this.#token = options.build.token;
    this.#expiration = options.build.token_exp;
    this.#services = new Set(options.build.services.map((s) => s.id));
  }

  /** The build's current install token (masked in every log by the executor). */
  get token(): string {
    return this.#token;
  }

  /**
   * Refreshes the install token when it is close to expiring, then gets the scoped install tokens
   * and ID request tokens the containers ask for. Failures are kept per container and thrown by
   * {@link environment}, so the build errors as Go's does ("unable to update SCM auth").
   */
  prepare(ctx: Context): Promise<void> {
    this.#prepared ??= this.#prepare(ctx);
    return this.#prepared;
  }

  async #prepare(ctx: Context): Promise<void> {
    const { client, org, repo, number } = this.#o;
    const now = (this.#o.nowSec ?? nowSec)();
    if (this.#expiration !== 0 && this.#token !== '' && now >= this.#expiration - SCM_REFRESH_WINDOW_SEC) {
      this.#o.logger?.info({ expiration: this.#expiration }, 'refreshing the SCM install token');
      try {
        const t = await client.refreshInstallToken(ctx, org, repo, number, this.#token);
        this.#token = t.token;
        this.#expiration = t.expiration;
      } catch (e) {
        const error = new Error(`unable to update SCM auth: unable to refresh SCM token: ${errText(e)}`);
        for (const c of this.#containers()) this.#scoped.set(c.id, error);
      }
    }
    for (const c of this.#containers()) {
      const repos = c.git?.token.repositories ?? [];
      if (repos.length > 0 && !this.#scoped.has(c.id)) {
        this.#o.logger?.info({ container: c.id }, `container ${c.name} requests an SCM token`);
        try {
          this.#scoped.set(c.id, await client.postInstallToken(ctx, org, repo, number, { repositories: repos, permissions: c.git?.token.permissions ?? {} }));
        } catch (e) {
          this.#scoped.set(c.id, new Error(`unable to update SCM auth: unable to post install token: ${errText(e)}`));
        }
      }
      if (c.id_request !== '' && !this.#services.has(c.id)) {
        try {
          const commands = c.commands.length > 0 || c.entrypoint.length > 0;
          this.#idRequest.set(c.id, await client.idRequestToken(ctx, org, repo, number, { image: c.image, request: c.id_request, commands }));
        } catch (e) {
          this.#idRequest.set(c.id, new Error(`unable to get an ID request token for ${c.name}: ${errText(e)}`));
        }
      }
    }
  }

  /** Services and steps (not init), as ExecBuild calls UpdateSCMAuth for. */
  #containers(): Container[] {
    return allContainers(this.#o.build).filter((c) => c.name !== 'init' || c.image !== '#init');
  }

  /**
   * The credentials of `container`. Throws what {@link prepare} could not get for it (the executor
   * then errors the build while assembling it, as Go errors ExecBuild).
   */
  environment(container: Container): Record<string, string> {
    const scoped = this.#scoped.get(container.id);
    if (scoped instanceof Error) throw scoped;
    const granted = scoped ?? { token: this.#token, expiration: this.#expiration };
    const env: Record<string, string> = {};
    if (granted.token !== '') {
      env['VELA_NETRC_PASSWORD'] = granted.token;
      env['VELA_GIT_TOKEN'] = granted.token;
      env['VELA_GIT_TOKEN_EXPIRATION'] = String(granted.expiration);
    }
    if (!this.#services.has(container.id)) {
      const id = this.#idRequest.get(container.id);
      if (id instanceof Error) throw id;
      env['VELA_ID_TOKEN_REQUEST_TOKEN'] = id ?? '';
      const addr = container.environment['VELA_SERVER_ADDR'] ?? this.#o.serverAddr;
      env['VELA_ID_TOKEN_REQUEST_URL'] = `${addr}/api/v1/repos/${this.#o.org}/${this.#o.repo}/builds/${this.#o.number}/id_token`;
    }
    return env;
  }

  /**
   * A reporter that runs {@link prepare} when the build first reports `running`; put it after the
   * Vela reporter, so that the server already has the build running (the POST requires it).
   */
  reporter(): Reporter {
    return {
      buildStatus: async (ctx, build) => {
        if (build.status === 'running') await this.prepare(ctx);
      },
      stepStatus: () => Promise.resolve(),
      appendLog: () => Promise.resolve(),
      closeLog: () => Promise.resolve(),
    };
  }
}
