import { emptyContainer } from '@berth/pipeline';
import { describe, expect, it } from 'vitest';
import { credentialsOf, maskSecrets, prepareEnvironment } from './environment.ts';

const vars = { host: 'h', runtime: 'dummy', version: '1.0.0', environment: () => ({ VELA_NETRC_PASSWORD: 'netrc-pw-1' }) };

describe('prepareEnvironment', () => {
  it("sets the worker's variables, substitutes with secrets that allow it, and sets protected ones after", () => {
    const step = emptyContainer({ name: 's', image: 'busybox', commands: ['echo hi'], environment: { OPEN_REF: '${OPEN}', CLOSED_REF: '${CLOSED}' } });
    step.secrets = [
      { source: 'open', target: 'OPEN' },
      { source: 'closed', target: 'CLOSED' },
    ];
    const secrets = new Map([
      ['open', { value: 'open-1' }],
      ['closed', { value: 'closed-2', substitution: false }],
    ]);
    expect(prepareEnvironment(step, 'step', vars, secrets)).toEqual([]);
    expect(step.environment).toMatchObject({
      VELA_HOST: 'h',
      VELA_RUNTIME: 'dummy',
      // W internal/step/environment.go Environment: the version as version.New's Semantic (v…)
      // and the four outputs files; PlanStep's running step (S api/types/step.go Environment).
      VELA_VERSION: 'v1.0.0',
      VELA_DISTRIBUTION: 'linux',
      VELA_OUTPUTS: '/vela/outputs/.env',
      VELA_MASKED_OUTPUTS: '/vela/outputs/masked.env',
      VELA_BASE64_OUTPUTS: '/vela/outputs/base64.env',
      VELA_MASKED_BASE64_OUTPUTS: '/vela/outputs/masked.base64.env',
      VELA_STEP_NAME: 's',
      VELA_STEP_IMAGE: 'busybox',
      VELA_STEP_STATUS: 'running',
      VELA_STEP_HOST: 'h',
      VELA_STEP_RUNTIME: 'dummy',
      VELA_STEP_DISTRIBUTION: 'linux',
      VELA_STEP_EXIT_CODE: '0',
      OPEN: 'open-1',
      OPEN_REF: 'open-1',
      CLOSED: 'closed-2',
      CLOSED_REF: '',
    });
    // A step's commands became the build script; a service keeps its commands.
    expect(step.environment['VELA_BUILD_SCRIPT']).toBeDefined();
    const service = emptyContainer({ name: 'svc', image: 'busybox', commands: ['serve'] });
    prepareEnvironment(service, 'service', vars, new Map());
    expect(service.commands).toEqual(['serve']);
    // A service gets the worker's variables (W internal/service/environment.go), not a step's.
    expect(service.environment['VELA_VERSION']).toBe('v1.0.0');
    expect(service.environment['VELA_OUTPUTS']).toBeUndefined();
    expect(service.environment['VELA_STEP_STATUS']).toBeUndefined();
  });

  it('notes a withheld secret without its value', () => {
    const step = emptyContainer({ name: 's', image: 'busybox' });
    step.secrets = [{ source: 'deny', target: 'DENY' }];
    const notes = prepareEnvironment(step, 'step', vars, new Map([['deny', { value: 'deny-3', deniedFor: () => 'not here' }]]));
    expect(notes).toEqual(['secret <deny> was not set as DENY: not here']);
    expect(step.environment['DENY']).toBeUndefined();
  });
});

describe('maskSecrets', () => {
  it('masks the secrets and the credentials set in any container', () => {
    const step = emptyContainer({ name: 's', image: 'busybox', environment: { VELA_NETRC_PASSWORD: 'netrc-pw-1', VELA_GIT_TOKEN: '' } });
    expect(credentialsOf(step)).toEqual(['netrc-pw-1']);
    expect(maskSecrets('a netrc-pw-1 b line-one c', ['line-one\nline-two'], [step])).toBe('a *** b *** c');
    expect(maskSecrets('nothing to hide', [], [])).toBe('nothing to hide');
  });
});
