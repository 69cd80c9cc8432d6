/**
 * The JSON shapes of go-vela/server's `api/types` the worker reads and writes. Every field is
 * optional: the server sends Go `omitempty` pointers, so an absent field is not a zero value.
 * Times are unix seconds; `data` fields are padded standard base64.
 */

/** api.Repo (fields the worker uses; the rest pass through). */
interface VelaRepo {
  id?: number;
  owner?: { id?: number; name?: string; active?: boolean; admin?: boolean };
  org?: string;
  name?: string;
  full_name?: string;
  link?: string;
  clone?: string;
  branch?: string;
  topics?: string[];
  build_limit?: number;
  /** Build timeout in minutes; overrides the worker's build timeout when > 0. */
  timeout?: number;
  visibility?: string;
  private?: boolean;
  /** Trusted repos may run privileged images. */
  trusted?: boolean;
  active?: boolean;
  pipeline_type?: string;
  install_id?: number;
  [field: string]: unknown;
}

/** api.Build. The server applies only status, error, enqueued, started, finished, title, message, host, runtime and distribution on PUT. */
export interface VelaBuild {
  id?: number;
  repo?: VelaRepo;
  pipeline_id?: number;
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
  clone?: string;
  source?: string;
  title?: string;
  message?: string;
  commit?: string;
  sender?: string;
  author?: string;
  email?: string;
  link?: string;
  branch?: string;
  ref?: string;
  base_ref?: string;
  head_ref?: string;
  host?: string;
  route?: string;
  runtime?: string;
  distribution?: string;
  [field: string]: unknown;
}

/** api.Step. */
export interface VelaStep {
  id?: number;
  build_id?: number;
  repo_id?: number;
  number?: number;
  name?: string;
  image?: string;
  stage?: string;
  status?: string;
  error?: string;
  exit_code?: number;
  created?: number;
  started?: number;
  finished?: number;
  host?: string;
  runtime?: string;
  distribution?: string;
  report_as?: string;
}

/** api.Service: a Step without `stage` and `report_as`. The server applies only status, error, exit_code, started and finished on PUT. */
export type VelaService = Omit<VelaStep, 'stage' | 'report_as'>;

/** api.Log. `data` is base64 of the whole log. */
export interface VelaLog {
  id?: number;
  build_id?: number;
  repo_id?: number;
  service_id?: number;
  step_id?: number;
  data?: string;
  created_at?: number;
}

/** Worker statuses (server constants/worker_status.go). */
export type VelaWorkerStatus = 'idle' | 'available' | 'busy' | 'error';

/** api.Worker. On GET `running_builds` are full builds; on PUT only their `id`s matter. */
export interface VelaWorker {
  id?: number;
  hostname?: string;
  address?: string;
  routes?: string[];
  active?: boolean;
  status?: VelaWorkerStatus | (string & {});
  last_status_update_at?: number;
  running_builds?: VelaBuild[];
  last_build_started_at?: number;
  last_build_finished_at?: number;
  last_checked_in?: number;
  build_limit?: number;
}

/** api.Secret (fields the worker uses to match and inject). */
export interface VelaSecret {
  id?: number;
  org?: string;
  repo?: string;
  team?: string;
  name?: string;
  value?: string;
  type?: string;
  images?: string[];
  allow_events?: Record<string, unknown>;
  allow_command?: boolean;
  allow_substitution?: boolean;
}

/** api.BuildExecutable: `data` is base64 of the compiled pipeline JSON. Deleted on the server when read. */
export interface VelaExecutable {
  id?: number;
  build_id?: number;
  data?: string;
}

/** `GET /api/v1/queue/info`. */
export interface VelaQueueInfo {
  /** Padded standard base64 of the 32-byte Ed25519 public key. */
  queue_public_key?: string;
  /** A go-redis URL; used only when the worker has no queue address configured. */
  queue_address?: string;
}

/** `{"token"}` answers (worker create/refresh, build token). */
export interface VelaToken {
  token?: string;
  expiration?: number;
}
