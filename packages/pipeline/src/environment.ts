/**
 * The VELA_* environment a container receives (Vela `compiler/native/environment.go` and the
 * `Environment()` methods of the API build, repo and user types).
 */

/** The workspace root (`constants.WorkspaceDefault`). */
export const WORKSPACE_DEFAULT = '/vela/src';

/** Build facts for the environment (Vela `api.Build`); absent fields count as zero values. */
interface BuildInfo {
  number?: number;
  parent?: number;
  event?: string;
  event_action?: string;
  status?: string;
  error?: string;
  enqueued?: number;
  created?: number;
  started?: number;
  finished?: number;
  deploy?: string;
  deploy_number?: number;
  deploy_payload?: Record<string, string>;
  clone?: string;
  source?: string;
  title?: string;
  message?: string;
  commit?: string;
  sender?: string;
  sender_scm_id?: string;
  author?: string;
  email?: string;
  link?: string;
  branch?: string;
  ref?: string;
  head_ref?: string;
  base_ref?: string;
  host?: string;
  runtime?: string;
  distribution?: string;
  route?: string;
  approved_at?: number;
  approved_by?: string;
  fork?: boolean;
}

/** Repository facts for the environment (Vela `api.Repo`). */
interface RepoInfo {
  org?: string;
  name?: string;
  full_name?: string;
  link?: string;
  clone?: string;
  branch?: string;
  topics?: string[];
  build_limit?: number;
  timeout?: number;
  visibility?: string;
  private?: boolean;
  trusted?: boolean;
  active?: boolean;
  /** Events as Vela lists them (`push`, `pull_request:opened`, …). */
  allow_events?: string[];
  pipeline_type?: string;
  approve_build?: string;
  approval_timeout?: number;
  owner?: string;
  install_id?: number;
  custom_props?: Record<string, unknown>;
}

/** User facts for the environment (Vela `api.User`). */
interface UserInfo {
  name?: string;
  active?: boolean;
  admin?: boolean;
  favorites?: string[];
}

/** Server facts (Vela `internal.Metadata`); when given, the workspace includes host, org and repo. */
interface ServerInfo {
  /** VELA_ADDR (the web UI address). */
  webAddress?: string;
  /** VELA_SERVER_ADDR and VELA_HOST. */
  address?: string;
  database?: string;
  queue?: string;
  /** VELA_SOURCE: the SCM driver (github …). */
  source?: string;
  /** The SCM host: VELA_NETRC_MACHINE and part of the workspace path. */
  sourceHost?: string;
  openIdIssuer?: string;
}

/** Input of {@link velaEnvironment}. */
export interface EnvironmentInput {
  build?: BuildInfo;
  repo?: RepoInfo;
  user?: UserInfo;
  server?: ServerInfo;
}

/**
 * A value as Vela's `api.ToString` renders it: strings as is, booleans `true`/`false`, numbers in
 * Go's shortest form, a list of scalars joined with `,`, anything else as JSON with sorted keys.
 *
 * Used for plugin `parameters` (`PARAMETER_*` variables).
 */
export function toVelaString(value: unknown): string {
  if (typeof value === 'string') return value;
  if (typeof value === 'boolean') return value ? 'true' : 'false';
  if (typeof value === 'number') return goNumber(value);
  if (typeof value === 'bigint') return value.toString();
  if (Array.isArray(value)) {
    if (value.every((v) => v === null || ['string', 'number', 'boolean', 'bigint'].includes(typeof v))) {
      return value.map((v) => (v === null ? '' : typeof v === 'number' ? goNumber(v) : String(v))).join(',');
    }
    return sortedJson(value);
  }
  if (value === null || value === undefined) return 'null';
  return sortedJson(value);
}

function goNumber(n: number): string {
  if (Number.isNaN(n)) return 'NaN';
  if (!Number.isFinite(n)) return n > 0 ? '+Inf' : '-Inf';
  // YAML integers are Go ints (strconv.Itoa).
  if (Number.isSafeInteger(n)) return String(n);
  // Other numbers are float64, formatted as strconv.FormatFloat(f, 'g', -1, 64): the shortest
  // digits, in exponent form when the decimal exponent is < -4 or >= 6 (Go's rule for 'g' with
  // shortest precision). Gotcha: a YAML float with an integral value (`2.0`) is read as a JS
  // integer and printed as Go prints an int.
  const [mantissa = '', expText = '0'] = n.toExponential().split('e');
  const exp = Number(expText);
  if (exp < -4 || exp >= 6) {
    const abs = Math.abs(exp);
    return `${mantissa}e${exp < 0 ? '-' : '+'}${abs < 10 ? `0${abs}` : abs}`;
  }
  return String(n);
}

function sortedJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) => {
    if (v !== null && typeof v === 'object' && !Array.isArray(v)) {
      const obj = v as Record<string, unknown>;
      return Object.fromEntries(
        Object.keys(obj)
          .sort()
          .map((k) => [k, obj[k]]),
      );
    }
    return v;
  });
}

const str = (v: string | undefined): string => v ?? '';
const num = (v: number | undefined): string => String(v ?? 0);
const bool = (v: boolean | undefined): string => (v === true ? 'true' : 'false');

/** The workspace path of a build: `/vela/src`, or `/vela/src/<host>/<org>/<repo>` with server info. */
function workspacePath(input: EnvironmentInput): string {
  if (input.server === undefined) return WORKSPACE_DEFAULT;
  return `${WORKSPACE_DEFAULT}/${str(input.server.sourceHost)}/${str(input.repo?.org)}/${str(input.repo?.name)}`;
}

/** Vela's `api.Build.Environment(workspace)`: BUILD_* and VELA_BUILD_* variables. */
export function buildEnvironment(b: BuildInfo, workspace: string): Record<string, string> {
  const env: Record<string, string> = {
    VELA_BUILD_APPROVED_AT: num(b.approved_at),
    VELA_BUILD_APPROVED_BY: str(b.approved_by),
    VELA_BUILD_AUTHOR: str(b.author),
    VELA_BUILD_AUTHOR_EMAIL: str(b.email),
    VELA_BUILD_BASE_REF: str(b.base_ref),
    VELA_BUILD_BRANCH: str(b.branch),
    VELA_BUILD_CLONE: str(b.clone),
    VELA_BUILD_COMMIT: str(b.commit),
    VELA_BUILD_CREATED: num(b.created),
    VELA_BUILD_DISTRIBUTION: str(b.distribution),
    VELA_BUILD_ENQUEUED: num(b.enqueued),
    VELA_BUILD_EVENT: str(b.event),
    VELA_BUILD_EVENT_ACTION: str(b.event_action),
    VELA_BUILD_HOST: str(b.host),
    VELA_BUILD_MESSAGE: str(b.message),
    VELA_BUILD_PARENT: num(b.parent),
    VELA_BUILD_REF: str(b.ref),
    VELA_BUILD_ROUTE: str(b.route),
    VELA_BUILD_RUNTIME: str(b.runtime),
    VELA_BUILD_SENDER: str(b.sender),
    VELA_BUILD_SENDER_SCM_ID: str(b.sender_scm_id),
    VELA_BUILD_STARTED: num(b.started),
    VELA_BUILD_SOURCE: str(b.source),
    VELA_BUILD_STATUS: str(b.status),
    VELA_BUILD_TITLE: str(b.title),
    VELA_BUILD_WORKSPACE: workspace,
    BUILD_AUTHOR: str(b.author),
    BUILD_AUTHOR_EMAIL: str(b.email),
    BUILD_BASE_REF: str(b.base_ref),
    BUILD_BRANCH: str(b.branch),
    BUILD_CLONE: str(b.clone),
    BUILD_COMMIT: str(b.commit),
    BUILD_CREATED: num(b.created),
    BUILD_ENQUEUED: num(b.enqueued),
    BUILD_EVENT: str(b.event),
    BUILD_HOST: str(b.host),
    BUILD_MESSAGE: str(b.message),
    BUILD_PARENT: num(b.parent),
    BUILD_REF: str(b.ref),
    BUILD_SENDER: str(b.sender),
    BUILD_STARTED: num(b.started),
    BUILD_SOURCE: str(b.source),
    BUILD_STATUS: str(b.status),
    BUILD_TITLE: str(b.title),
    BUILD_WORKSPACE: workspace,
  };
  if ((b.number ?? 0) > 0) {
    env['VELA_BUILD_NUMBER'] = num(b.number);
    env['BUILD_NUMBER'] = num(b.number);
    env['VELA_BUILD_LINK'] = str(b.link);
    env['BUILD_LINK'] = str(b.link);
  }
  const event = str(b.event).toLowerCase();
  const ref = str(b.ref);
  if (event === 'comment' || event === 'pull_request') {
    // refs/pull/<number>/head
    const number = ref.split('/', 4)[2] ?? '';
    env['BUILD_PULL_REQUEST_NUMBER'] = number;
    env['VELA_BUILD_PULL_REQUEST'] = number;
    env['VELA_PULL_REQUEST'] = number;
    env['VELA_PULL_REQUEST_SOURCE'] = str(b.head_ref);
    env['VELA_PULL_REQUEST_TARGET'] = str(b.base_ref);
    if (event === 'pull_request') env['VELA_PULL_REQUEST_FORK'] = bool(b.fork);
  }
  if (event === 'deployment') {
    const target = str(b.deploy);
    env['VELA_BUILD_TARGET'] = target;
    env['VELA_DEPLOYMENT'] = target;
    env['BUILD_TARGET'] = target;
    env['VELA_DEPLOYMENT_NUMBER'] = num(b.deploy_number);
    if (ref.startsWith('refs/tags/')) {
      const tag = ref.slice('refs/tags/'.length);
      env['BUILD_TAG'] = tag;
      env['VELA_BUILD_TAG'] = tag;
    }
    for (const [key, value] of Object.entries(b.deploy_payload ?? {})) {
      env[`DEPLOYMENT_PARAMETER_${key.toUpperCase()}`] = value;
    }
  }
  if (event === 'tag') {
    const i = ref.indexOf('refs/tags/');
    const tag = i < 0 ? '' : ref.slice(i + 'refs/tags/'.length);
    env['BUILD_TAG'] = tag;
    env['VELA_BUILD_TAG'] = tag;
  }
  if (event === 'delete' && str(b.event_action).toLowerCase() === 'tag') {
    env['BUILD_TAG'] = str(b.branch);
    env['VELA_BUILD_TAG'] = str(b.branch);
  }
  return env;
}

/** Vela's `api.Repo.Environment()`: VELA_REPO_* and the deprecated REPOSITORY_* variables. */
export function repoEnvironment(r: RepoInfo): Record<string, string> {
  const allowEvents = (r.allow_events ?? []).join(',');
  return {
    VELA_REPO_ACTIVE: bool(r.active),
    VELA_REPO_ALLOW_EVENTS: allowEvents,
    VELA_REPO_BRANCH: str(r.branch),
    VELA_REPO_TOPICS: (r.topics ?? []).join(','),
    VELA_REPO_BUILD_LIMIT: num(r.build_limit),
    VELA_REPO_CLONE: str(r.clone),
    VELA_REPO_FULL_NAME: str(r.full_name),
    VELA_REPO_LINK: str(r.link),
    VELA_REPO_NAME: str(r.name),
    VELA_REPO_ORG: str(r.org),
    VELA_REPO_PRIVATE: bool(r.private),
    VELA_REPO_TIMEOUT: num(r.timeout),
    VELA_REPO_TRUSTED: bool(r.trusted),
    VELA_REPO_VISIBILITY: str(r.visibility),
    VELA_REPO_PIPELINE_TYPE: str(r.pipeline_type),
    VELA_REPO_APPROVE_BUILD: str(r.approve_build),
    VELA_REPO_APPROVAL_TIMEOUT: num(r.approval_timeout),
    VELA_REPO_OWNER: str(r.owner),
    VELA_REPO_INSTALL_ID: num(r.install_id),
    VELA_REPO_CUSTOM_PROPS: sortedJson(r.custom_props ?? {}),
    REPOSITORY_ACTIVE: bool(r.active),
    REPOSITORY_ALLOW_EVENTS: allowEvents,
    REPOSITORY_BRANCH: str(r.branch),
    REPOSITORY_CLONE: str(r.clone),
    REPOSITORY_FULL_NAME: str(r.full_name),
    REPOSITORY_LINK: str(r.link),
    REPOSITORY_NAME: str(r.name),
    REPOSITORY_ORG: str(r.org),
    REPOSITORY_PRIVATE: bool(r.private),
    REPOSITORY_TIMEOUT: num(r.timeout),
    REPOSITORY_TRUSTED: bool(r.trusted),
    REPOSITORY_VISIBILITY: str(r.visibility),
  };
}

/** Vela's `api.User.Environment()`: VELA_USER_* variables. */
function userEnvironment(u: UserInfo): Record<string, string> {
  return {
    VELA_USER_ACTIVE: bool(u.active),
    VELA_USER_ADMIN: bool(u.admin),
    // ToString of a []string (not []any) takes its default branch: YAML, then JSON (S api/types/string.go).
    VELA_USER_FAVORITES: JSON.stringify(u.favorites ?? []),
    VELA_USER_NAME: str(u.name),
  };
}

/**
 * The default environment every container of a build receives (Vela's `environment()` in
 * compiler/native): `VELA=true`, `CI=true`, `VELA_WORKSPACE`, server addresses (`TODO` when no
 * server info is given, as Vela does), then the repo's, the build's and the user's variables.
 *
 * Gotcha: `HOME` and `SHELL` are not here; they are set with the script ({@link applyScript}).
 * The compiler lays this environment *over* the pipeline's and the step's own variables, so a
 * pipeline cannot override VELA_* values.
 */
export function velaEnvironment(input: EnvironmentInput = {}): Record<string, string> {
  const todo = 'TODO';
  const env: Record<string, string> = {
    VELA: 'true',
    VELA_ADDR: todo,
    VELA_DATABASE: todo,
    VELA_DISTRIBUTION: todo,
    VELA_HOST: todo,
    VELA_NETRC_MACHINE: todo,
    VELA_NETRC_USERNAME: 'x-oauth-basic',
    VELA_QUEUE: todo,
    VELA_RUNTIME: todo,
    VELA_SOURCE: todo,
    VELA_VERSION: todo,
    CI: 'true',
  };
  const server = input.server;
  if (server !== undefined) {
    env['VELA_ADDR'] = str(server.webAddress);
    env['VELA_SERVER_ADDR'] = str(server.address);
    env['VELA_DATABASE'] = str(server.database);
    env['VELA_HOST'] = str(server.address);
    env['VELA_NETRC_MACHINE'] = str(server.sourceHost);
    env['VELA_QUEUE'] = str(server.queue);
    env['VELA_SOURCE'] = str(server.source);
    env['VELA_OPEN_ID_ISSUER'] = str(server.openIdIssuer);
  }
  const workspace = workspacePath(input);
  env['VELA_WORKSPACE'] = workspace;
  Object.assign(env, repoEnvironment(input.repo ?? {}));
  Object.assign(env, buildEnvironment(input.build ?? {}, workspace));
  Object.assign(env, userEnvironment(input.user ?? {}));
  return env;
}
