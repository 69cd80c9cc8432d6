import { type Container, emptyContainer } from '@berth/pipeline';
import { describe, expect, it } from 'vitest';
import type { VelaSecret } from '../vela/models.ts';
import { secretAddress, velaSecretDenial } from './secrets.ts';

// The defaults the server gives a repo secret on create (S api/secret/create.go).
const DEFAULTS: VelaSecret = {
  value: 'v',
  images: [],
  allow_events: {
    push: { branch: true, tag: true, delete_branch: false, delete_tag: false },
    pull_request: {},
    deployment: { created: true },
    comment: {},
    schedule: {},
  },
  allow_command: true,
  allow_substitution: true,
};

function step(fields: Partial<Container> = {}, event = 'push', action = ''): Container {
  return emptyContainer({
    name: 's',
    image: 'alpine:3.20',
    ...fields,
    environment: { VELA_BUILD_EVENT: event, VELA_BUILD_EVENT_ACTION: action, ...fields.environment },
  });
}

describe('velaSecretDenial (Vela Secret.Match)', () => {
  const cases: Array<[string, Partial<VelaSecret>, Container, RegExp | undefined]> = [
    ['defaults, a push step with commands', {}, step({ commands: ['make'] }), undefined],
    ['defaults, a tag build', {}, step({}, 'tag'), undefined],
    ['defaults, a deployment:created build', {}, step({}, 'deployment', 'created'), undefined],
    ['defaults, a deployment build without an action (older servers)', {}, step({}, 'deployment'), undefined],
    [
      'defaults deny pull requests',
      {},
      step({}, 'pull_request', 'opened'),
      /not allowed for pull_request:opened builds \(allow_events: push, tag, deployment\)/,
    ],
    ['pull_request:synchronize allowed', { allow_events: { pull_request: { synchronize: true } } }, step({}, 'pull_request', 'synchronize'), undefined],
    [
      'pull_request:opened not allowed by synchronize alone',
      { allow_events: { pull_request: { synchronize: true } } },
      step({}, 'pull_request', 'opened'),
      /allow_events: pull_request:synchronize\)/,
    ],
    ['comment:edited', { allow_events: { comment: { edited: true } } }, step({}, 'comment', 'edited'), undefined],
    ['schedule', { allow_events: { schedule: { run: true } } }, step({}, 'schedule'), undefined],
    ['delete:branch', { allow_events: { push: { delete_branch: true } } }, step({}, 'delete', 'branch'), undefined],
    ['no allow_events at all allows nothing', { allow_events: undefined }, step(), /not allowed for push builds \(allow_events: none\)/],
    ['an unknown event', {}, step({}, 'merge_group'), /not allowed for merge_group builds/],
    ['allow_command false with commands', { allow_command: false }, step({ commands: ['env'] }), /does not allow commands .* has commands/],
    ['allow_command false with an entrypoint', { allow_command: false }, step({ entrypoint: ['/bin/sh'] }), /sets its own entrypoint/],
    ['allow_command false, a plain plugin', { allow_command: false }, step({ image: 'plugins/docker:1' }), undefined],
    ['allow_command unset counts as false', { allow_command: undefined }, step({ commands: ['env'] }), /does not allow commands/],
    ['images: prefix match', { images: ['plugins/docker'] }, step({ image: 'plugins/docker:20.10' }), undefined],
    [
      'images: another image',
      { images: ['plugins/docker', 'plugins/kaniko'] },
      step({ image: 'alpine:3.20' }),
      /restricted to the images plugins\/docker, plugins\/kaniko, and this container runs alpine:3\.20/,
    ],
    ['images: only empty entries match nothing', { images: [''] }, step(), /restricted to the images \(none\)/],
    [
      'images checked only after events',
      { images: ['plugins/docker'] },
      step({ image: 'plugins/docker' }, 'pull_request', 'opened'),
      /not allowed for pull_request:opened/,
    ],
  ];
  it.each(cases)('%s', (_name, override, container, expected) => {
    const denial = velaSecretDenial({ ...DEFAULTS, ...override }, container);
    if (expected === undefined) expect(denial).toBeUndefined();
    else expect(denial).toMatch(expected);
  });
});

describe('secretAddress', () => {
  const repo = { org: 'octo', name: 'app' };
  const secret = (type: string, key: string) => ({ name: 'n', key, engine: 'native', type, origin: null, pull: 'build_start', value: '' }) as const;
  it('reads org, repo and shared keys', () => {
    expect(secretAddress(secret('repo', 'octo/app/token'), repo)).toEqual({ engine: 'native', type: 'repo', org: 'octo', name: 'app', key: 'token' });
    expect(secretAddress(secret('org', 'octo/token'), repo)).toEqual({ engine: 'native', type: 'org', org: 'octo', name: '*', key: 'token' });
    expect(secretAddress(secret('shared', 'octo/team/token'), repo)).toEqual({ engine: 'native', type: 'shared', org: 'octo', name: 'team', key: 'token' });
  });
  it("refuses another repo's secret, with the reason", () => {
    expect(() => secretAddress(secret('repo', 'other/app/token'), repo)).toThrow(/repo secret of other\/app is not available to a build of octo\/app/);
  });
});
