/**
 * Vela's event masks (`api.Events`, S `api/types/events.go`): which `event[:action]` a secret's
 * `allow_events` (or a repo's) allows, and their names as Vela lists them.
 */

/** `allow_events` as the API sends it: `{ push: { branch: true, … }, pull_request: { … }, … }`. */
export type VelaEvents = Record<string, unknown>;

/**
 * Each `event[:action]` Vela's `Events.Allowed` (S `api/types/events.go`) accepts, the flag it
 * needs, and the name `Events.List` gives it, in `List`'s order. Gotcha: a deployment is allowed
 * only as `deployment:created`; a bare `deployment` (no action) matches no case of `Allowed`'s
 * switch and is denied, though `List` names the flag `deployment`.
 */
const FLAGS: ReadonlyArray<[allowed: string, group: string, flag: string, listed: string]> = [
  ['push', 'push', 'branch', 'push'],
  ['pull_request:opened', 'pull_request', 'opened', 'pull_request:opened'],
  ['pull_request:synchronize', 'pull_request', 'synchronize', 'pull_request:synchronize'],
  ['pull_request:edited', 'pull_request', 'edited', 'pull_request:edited'],
  ['pull_request:reopened', 'pull_request', 'reopened', 'pull_request:reopened'],
  ['pull_request:labeled', 'pull_request', 'labeled', 'pull_request:labeled'],
  ['pull_request:unlabeled', 'pull_request', 'unlabeled', 'pull_request:unlabeled'],
  ['tag', 'push', 'tag', 'tag'],
  ['deployment:created', 'deployment', 'created', 'deployment'],
  ['comment:created', 'comment', 'created', 'comment:created'],
  ['comment:edited', 'comment', 'edited', 'comment:edited'],
  ['schedule', 'schedule', 'run', 'schedule'],
  ['delete:branch', 'push', 'delete_branch', 'delete:branch'],
  ['delete:tag', 'push', 'delete_tag', 'delete:tag'],
];

function isSet(events: VelaEvents | undefined, group: string, flag: string): boolean {
  const g = events?.[group];
  return g !== null && typeof g === 'object' && (g as Record<string, unknown>)[flag] === true;
}

/**
 * Vela's `Events.Allowed(event, action)` (S `api/types/events.go`): whether `events` allows a
 * build of this event and action. Anything not in its switch (a bare `deployment`, an unknown
 * event or action) is denied.
 */
export function eventAllowed(events: VelaEvents | undefined, event: string, action: string): boolean {
  const name = action === '' ? event : `${event}:${action}`;
  const entry = FLAGS.find(([allowed]) => allowed === name);
  return entry !== undefined && isSet(events, entry[1], entry[2]);
}

/** Vela's `Events.List`: the `event[:action]` names `events` allows, in Vela's order. */
export function eventNames(events: VelaEvents | undefined): string[] {
  return FLAGS.filter(([, group, flag]) => isSet(events, group, flag)).map(([, , , listed]) => listed);
}
