// Vela's event masks, against its own tables: S api/types/events_test.go TestTypes_Events_Allowed
// (testEvents and its inverse) and the whole event × action matrix of Events.Allowed's switch
// (S api/types/events.go).
import { describe, expect, it } from 'vitest';
import { eventAllowed, eventNames, type VelaEvents } from './events.ts';

// S api/types/events_test.go testEvents(): e1, and e2 its inverse.
const E1: VelaEvents = {
  push: { branch: true, tag: true, delete_branch: true, delete_tag: false },
  pull_request: { opened: true, synchronize: true, edited: false, reopened: true, labeled: false, unlabeled: true },
  deployment: { created: false },
  comment: { created: true, edited: false },
  schedule: { run: true },
};
const E2: VelaEvents = {
  push: { branch: false, tag: false, delete_branch: false, delete_tag: true },
  pull_request: { opened: false, synchronize: false, edited: true, reopened: false, labeled: true, unlabeled: false },
  deployment: { created: true },
  comment: { created: false, edited: true },
  schedule: { run: false },
};

const ALL: VelaEvents = {
  push: { branch: true, tag: true, delete_branch: true, delete_tag: true },
  pull_request: { opened: true, synchronize: true, edited: true, reopened: true, labeled: true, unlabeled: true },
  deployment: { created: true },
  comment: { created: true, edited: true },
  schedule: { run: true },
};

describe('eventAllowed (Vela Events.Allowed)', () => {
  // TestTypes_Events_Allowed's table, verbatim.
  const table: Array<[event: string, action: string, want: boolean]> = [
    ['push', '', true],
    ['tag', '', true],
    ['pull_request', 'opened', true],
    ['pull_request', 'synchronize', true],
    ['pull_request', 'edited', false],
    ['pull_request', 'reopened', true],
    ['pull_request', 'labeled', false],
    ['pull_request', 'unlabeled', true],
    ['deployment', 'created', false],
    ['comment', 'created', true],
    ['comment', 'edited', false],
    ['schedule', '', true],
    ['delete', 'branch', true],
    ['delete', 'tag', false],
  ];
  it.each(table)('%s:%s is %s (and the inverse for the inverse mask)', (event, action, want) => {
    expect(eventAllowed(E1, event, action)).toBe(want);
    expect(eventAllowed(E2, event, action)).toBe(!want);
  });

  // Every event and action Vela knows (S constants/event.go, constants/action.go), with and
  // without an action: only the cases of Allowed's switch can be allowed, even with every flag on.
  const events = [
    'push',
    'pull_request',
    'tag',
    'deployment',
    'comment',
    'schedule',
    'delete',
    'merge_group',
    'repository',
    'custom_property_values',
    'pull',
    'deploy',
    'fake_event',
  ];
  const actions = [
    '',
    'opened',
    'created',
    'edited',
    'renamed',
    'reopened',
    'synchronize',
    'labeled',
    'unlabeled',
    'transferred',
    'branch',
    'tag',
    'run',
    'checks_requested',
    'destroyed',
  ];
  const switchCases = new Set([
    'push',
    'pull_request:opened',
    'pull_request:synchronize',
    'pull_request:edited',
    'pull_request:reopened',
    'pull_request:labeled',
    'pull_request:unlabeled',
    'tag',
    'comment:created',
    'comment:edited',
    'deployment:created',
    'schedule',
    'delete:branch',
    'delete:tag',
  ]);
  const matrix = events.flatMap((e) => actions.map((a) => [e, a, switchCases.has(a === '' ? e : `${e}:${a}`)] as const));
  it.each(matrix)('every flag on: %s with action "%s" allowed: %s', (event, action, want) => {
    expect(eventAllowed(ALL, event, action)).toBe(want);
  });

  it('denies a bare deployment (no action) whatever the mask: it is no case of the switch', () => {
    expect(eventAllowed(ALL, 'deployment', '')).toBe(false);
    expect(eventAllowed({ deployment: { created: true } }, 'deployment', '')).toBe(false);
    expect(eventAllowed({ deployment: { created: true } }, 'deployment', 'created')).toBe(true);
  });

  it('denies everything for a missing or malformed mask', () => {
    expect(eventAllowed(undefined, 'push', '')).toBe(false);
    expect(eventAllowed({ push: true }, 'push', '')).toBe(false);
    expect(eventAllowed({ push: { branch: 'yes' } }, 'push', '')).toBe(false);
  });
});

describe('eventNames (Vela Events.List)', () => {
  it("names the flags as List does, in its order (deployment's flag is listed as `deployment`)", () => {
    expect(eventNames(E1)).toEqual([
      'push',
      'pull_request:opened',
      'pull_request:synchronize',
      'pull_request:reopened',
      'pull_request:unlabeled',
      'tag',
      'comment:created',
      'schedule',
      'delete:branch',
    ]);
    expect(eventNames(E2)).toEqual(['pull_request:edited', 'pull_request:labeled', 'deployment', 'comment:edited', 'delete:tag']);
  });
});
