/**
 * Vela's event masks (`api.Events`, S `api/types/events.go`): which `event[:action]` a secret's
 * `allow_events` (or a repo's) allows, and their names as Vela lists them.
 */

/** `allow_events` as the API sends it: `{ push: { branch: true, … }, pull_request: { … }, … }`. */
export type VelaEvents = Record<string, unknown>;

/** Each `event[:action]` and the flag it needs, in the order of Vela's `Events.List`. */
const FLAGS: ReadonlyArray<[name: string, group: string, flag: string]> = [
  ['push', 'push', 'branch'],
  ['pull_request:opened', 'pull_request', 'opened'],
  ['pull_request:synchronize', 'pull_request', 'synchronize'],
  ['pull_request:edited', 'pull_request', 'edited'],
  ['pull_request:reopened', 'pull_request', 'reopened'],
  ['pull_request:labeled', 'pull_request', 'labeled'],
  ['pull_request:unlabeled', 'pull_request', 'unlabeled'],
  ['tag', 'push', 'tag'],
  ['deployment', 'deployment', 'created'],
  ['comment:created', 'comment', 'created'],
  ['comment:edited', 'comment', 'edited'],
  ['schedule', 'schedule', 'run'],
  ['delete:branch', 'push', 'delete_branch'],
  ['delete:tag', 'push', 'delete_tag'],
];

/** Names that mean the same flag as a listed one (newer servers send deployments with their action). */
const ALIASES: Readonly<Record<string, string>> = { 'deployment:created': 'deployment' };

function isSet(events: VelaEvents | undefined, group: string, flag: string): boolean {
  const g = events?.[group];
  return g !== null && typeof g === 'object' && (g as Record<string, unknown>)[flag] === true;
}

/** Vela's `Events.Allowed(event, action)`: whether `events` allows a build of this event and action. */
export function eventAllowed(events: VelaEvents | undefined, event: string, action: string): boolean {
  const name = action === '' ? event : `${event}:${action}`;
  const entry = FLAGS.find(([n]) => n === (ALIASES[name] ?? name));
  return entry !== undefined && isSet(events, entry[1], entry[2]);
}

/** Vela's `Events.List`: the `event[:action]` names `events` allows, in Vela's order. */
export function eventNames(events: VelaEvents | undefined): string[] {
  return FLAGS.filter(([, group, flag]) => isSet(events, group, flag)).map(([name]) => name);
}
