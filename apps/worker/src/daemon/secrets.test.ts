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
    // S api/types/events.go Allowed: a bare `deployment` is no case of its switch (issue #26 item 4).
    [
      'defaults deny a deployment build without an action',
      {},
      step({}, 'deployment'),
      /not allowed for deployment builds \(allow_events: push, tag, deployment\)/,
    ],
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

// S api/types/secret_test.go TestTypes_Secret_Match, case by case (Match: allow_command, then
// Events.Allowed, then the images prefix list).
describe("velaSecretDenial against Vela's own Match table", () => {
  const testEvents = {
    push: { branch: true, tag: true },
    pull_request: { opened: false, synchronize: true, edited: false },
    deployment: { created: true },
    comment: { created: true, edited: true },
    schedule: { run: true },
  };
  const ctn = (env: Record<string, string>, fields: Partial<Container> = {}): Container =>
    emptyContainer({ name: 's', image: 'alpine:latest', ...fields, environment: env });
  const push = { VELA_BUILD_EVENT: 'push' };
  const table: Array<[name: string, step: Container, secret: Partial<VelaSecret>, want: boolean]> = [
    ['push', ctn(push), { images: [] }, true],
    ['pull request opened fail', ctn({ VELA_BUILD_EVENT: 'pull_request', VELA_BUILD_EVENT_ACTION: 'opened' }), { images: [] }, false],
    ['tag', ctn({ VELA_BUILD_EVENT: 'tag' }), { images: [] }, true],
    ['deployment', ctn({ VELA_BUILD_EVENT: 'deployment', VELA_BUILD_EVENT_ACTION: 'created' }), { images: [] }, true],
    ['comment created', ctn({ VELA_BUILD_EVENT: 'comment', VELA_BUILD_EVENT_ACTION: 'created' }), { images: [] }, true],
    ['fake event', ctn({ VELA_BUILD_EVENT: 'fake_event' }), { images: [] }, false],
    ['push with empty image constraint', ctn(push), { images: [] }, true],
    ['schedule', ctn({ VELA_BUILD_EVENT: 'schedule' }), { images: [] }, true],
    ['image basic', ctn(push), { images: ['alpine'] }, true],
    ['image and tag', ctn(push), { images: ['alpine:latest'] }, true],
    ['mismatch tag with same image', ctn(push), { images: ['alpine:1'] }, false],
    ['multiple allowed images', ctn(push), { images: ['alpine', 'centos'] }, true],
    ['push and image pass', ctn(push), { images: ['alpine'] }, true],
    ['push and image tag pass', ctn(push), { images: ['alpine:latest'] }, true],
    ['push and bad image tag', ctn(push), { images: ['alpine:1'] }, false],
    ['mismatch event and match image', ctn({ VELA_BUILD_EVENT: 'pull_request', VELA_BUILD_EVENT_ACTION: 'edited' }), { images: ['alpine:latest'] }, false],
    ['event and multi image allowed pass', ctn(push), { images: ['alpine', 'centos'] }, true],
    ['rulesets and push pass', ctn(push), { images: ['alpine'] }, true],
    ['no commands allowed', ctn(push, { commands: ['echo hi'] }), { images: ['alpine'], allow_command: false }, false],
    ['no commands allowed - entrypoint provided', ctn(push, { entrypoint: ['sh', '-c', 'echo hi'] }), { images: ['alpine'], allow_command: false }, false],
  ];
  it.each(table)('%s: injected %s', (_name, container, secret, want) => {
    // Match's secrets carry no allow_command unless set: nil reads as false (GetAllowCommand).
    const denial = velaSecretDenial({ value: 'foo', allow_events: testEvents, ...secret }, container);
    expect(denial === undefined).toBe(want);
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
  // S compiler/types/pipeline/secret.go ParseOrg/ParseRepo/ParseShared (ErrInvalidEngine), which
  // go-vela/worker executor/linux/secret.go pull calls before asking the server.
  it('refuses an engine other than native or vault (any case), before asking the server', () => {
    const withEngine = (engine: string, type: string, key: string) => ({ ...secret(type, key), engine });
    for (const [type, key] of [
      ['repo', 'octo/app/token'],
      ['org', 'octo/token'],
      ['shared', 'octo/team/token'],
    ] as const) {
      expect(() => secretAddress(withEngine('aws', type, key), repo)).toThrow(
        /secret <n>: invalid secret engine "aws": Vela's secret engines are native and vault/,
      );
      expect(secretAddress(withEngine('Vault', type, key), repo).engine).toBe('Vault');
      expect(secretAddress(withEngine('NATIVE', type, key), repo).engine).toBe('NATIVE');
    }
  });
  it("refuses another repo's secret, with the reason", () => {
    expect(() => secretAddress(secret('repo', 'other/app/token'), repo)).toThrow(/repo secret of other\/app is not available to a build of octo\/app/);
  });
});
