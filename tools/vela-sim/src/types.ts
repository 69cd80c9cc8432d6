// The JSON shapes of go-vela/server's api/types the worker-facing routes use. Every field is
// optional on the wire (Go `omitempty` pointers); the sim's stored records fill the ones it knows.

/** api.Repo (subset the worker reads, plus what the sim sets). */
export interface VelaRepo {
  id?: number;
  owner?: { id?: number; name?: string; active?: boolean };
  org?: string;
  name?: string;
  full_name?: string;
  link?: string;
  clone?: string;
  branch?: string;
  timeout?: number;
  visibility?: string;
  private?: boolean;
  trusted?: boolean;
  active?: boolean;
  pipeline_type?: string;
  [field: string]: unknown;
}

/** api.Build. */
export interface VelaBuild {
  id?: number;
  repo?: VelaRepo;
  number?: number;
  event?: string;
  status?: string;
  error?: string;
  enqueued?: number;
  created?: number;
  started?: number;
  finished?: number;
  title?: string;
  message?: string;
  commit?: string;
  branch?: string;
  ref?: string;
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

/** api.Service. */
export type VelaService = Omit<VelaStep, 'stage' | 'report_as'>;

/** api.Log; `data` is padded standard base64. */
export interface VelaLog {
  id?: number;
  build_id?: number;
  repo_id?: number;
  service_id?: number;
  step_id?: number;
  data?: string;
  created_at?: number;
}

/** api.Worker. `running_builds` are full builds on GET; the sim stores ids. */
export interface VelaWorker {
  id?: number;
  hostname?: string;
  address?: string;
  routes?: string[];
  active?: boolean;
  status?: string;
  last_status_update_at?: number;
  running_builds?: VelaBuild[];
  last_build_started_at?: number;
  last_build_finished_at?: number;
  last_checked_in?: number;
  build_limit?: number;
}

/** api.Secret (subset). */
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

/** queue/models.Item, the JSON inside a signed queue entry. */
export interface VelaQueueItem {
  build: VelaBuild;
  item_version: number;
}
