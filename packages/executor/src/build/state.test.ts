import { describe, expect, it } from 'vitest';
import { BuildRecord, finalBuildOutcome, formatDuration, initFailureStatus, interruptedOutcome, interruptionOf, unfinishedOutcome } from './state.ts';

const none = { canceled: false, buildCanceled: false, deadline: false, execCanceled: false };
const facts = { canceled: false, timedOut: false, errored: false, timeoutMs: 300 };

describe('interruptionOf', () => {
  it('a cancel wins over the deadline; the deadline over a cancelled exec; else stopped', () => {
    expect(interruptionOf({ ...none, canceled: true, deadline: true })).toBe('canceled');
    expect(interruptionOf({ ...none, buildCanceled: true, deadline: true })).toBe('canceled');
    expect(interruptionOf({ ...none, deadline: true, execCanceled: true })).toBe('timeout');
    expect(interruptionOf({ ...none, execCanceled: true })).toBe('canceled');
    expect(interruptionOf(none)).toBe('stopped');
  });
});

describe('interruptedOutcome', () => {
  it('canceled, failure on the timeout (Vela fails the running step), killed when stopped; always 137', () => {
    expect(interruptedOutcome('canceled', 300)).toEqual({ status: 'canceled', exitCode: 137, error: 'the build was canceled' });
    expect(interruptedOutcome('timeout', 300)).toEqual({ status: 'failure', exitCode: 137, error: 'the build timed out after 300ms' });
    expect(interruptedOutcome('stopped', 300)).toMatchObject({ status: 'killed', exitCode: 137 });
  });
});

describe('unfinishedOutcome (destroyBuild)', () => {
  const running = { status: 'running' as const, ran: true, exited: false, exitCode: 0 };
  it('leaves final statuses alone', () => {
    expect(unfinishedOutcome({ ...running, status: 'success' }, facts)).toBeUndefined();
  });
  it('a service or detached step still running at the end succeeded; one that exited reports its code', () => {
    expect(unfinishedOutcome(running, facts)).toMatchObject({ how: 'ended', status: 'success', exitCode: 0 });
    expect(unfinishedOutcome({ ...running, exited: true, exitCode: 4 }, { ...facts, canceled: true })).toMatchObject({
      how: 'ended',
      status: 'failure',
      exitCode: 4,
      error: 'exited with code 4',
    });
  });
  it('on a cancel a running container is interrupted; on a timeout too, when it had not run', () => {
    expect(unfinishedOutcome(running, { ...facts, canceled: true })).toMatchObject({ how: 'interrupted', status: 'canceled', exitCode: 137 });
    expect(unfinishedOutcome({ ...running, ran: false }, { ...facts, timedOut: true })).toMatchObject({ how: 'interrupted', status: 'failure', exitCode: 137 });
  });
  it('a step never reached: canceled on a cancel, killed on an error or timeout, else skipped', () => {
    const pending = { status: 'pending' as const, ran: false, exited: false, exitCode: 0 };
    expect(unfinishedOutcome(pending, { ...facts, canceled: true, errored: true })).toMatchObject({ how: 'not-reached', status: 'canceled' });
    expect(unfinishedOutcome(pending, { ...facts, errored: true })).toMatchObject({ status: 'killed', exitCode: 137 });
    expect(unfinishedOutcome(pending, { ...facts, timedOut: true })).toMatchObject({ status: 'killed', exitCode: 137 });
    expect(unfinishedOutcome(pending, facts)).toMatchObject({ status: 'skipped' });
  });
});

describe('finalBuildOutcome and the init step', () => {
  const base = { canceled: false, cancelCause: undefined, error: undefined, status: 'running' as const, failed: false };
  it('canceled (with its reason) wins, then error, killed when never started, then failure or success', () => {
    expect(finalBuildOutcome({ ...base, canceled: true, cancelCause: new Error('by the user'), error: undefined })).toEqual({
      status: 'canceled',
      error: 'the build was canceled: by the user',
    });
    expect(finalBuildOutcome({ ...base, canceled: true })).toEqual({ status: 'canceled', error: 'the build was canceled' });
    expect(finalBuildOutcome({ ...base, error: 'boom', failed: true })).toEqual({ status: 'error', error: 'boom' });
    expect(finalBuildOutcome({ ...base, status: 'pending' })).toEqual({ status: 'killed', error: undefined });
    expect(finalBuildOutcome({ ...base, failed: true })).toEqual({ status: 'failure', error: undefined });
    expect(finalBuildOutcome(base)).toEqual({ status: 'success', error: undefined });
    expect(initFailureStatus(true)).toBe('canceled');
    expect(initFailureStatus(false)).toBe('failure');
  });
  it('formats durations', () => {
    expect(formatDuration(150)).toBe('150ms');
    expect(formatDuration(2500)).toBe('2.5s');
    expect(formatDuration(3_723_000)).toBe('1h 2m 3s');
  });
});

describe('BuildRecord', () => {
  it('is pending with no times until it starts; finishes by the final rule with its end time', () => {
    const record = new BuildRecord();
    expect(record.reportFields()).toEqual({ status: 'pending' });
    record.finish(20);
    expect(record.reportFields()).toEqual({ status: 'killed', finished: 20 });
    const ran = new BuildRecord();
    ran.start(10);
    expect(ran.reportFields()).toEqual({ status: 'running', started: 10 });
    expect(ran.ruleStatus).toBe('running');
    ran.stepFailed();
    expect(ran.ruleStatus).toBe('failure');
    ran.finish(30);
    expect(ran.reportFields()).toEqual({ status: 'failure', started: 10, finished: 30 });
  });

  it('keeps the first error; a cancel wins over it at the end, with the reason of the first cancel seen', () => {
    const record = new BuildRecord();
    record.start(1);
    record.errored('first');
    record.errored('second');
    expect(record.error).toBe('first');
    expect(record.facts(300)).toEqual({ canceled: false, timedOut: false, errored: true, timeoutMs: 300 });
    record.interrupted('canceled', () => new Error('worker draining'));
    record.interrupted('canceled', () => new Error('not this one'));
    record.finish(2);
    expect(record.reportFields()).toMatchObject({ status: 'canceled', error: 'first' });
    const plain = new BuildRecord();
    plain.start(1);
    plain.interrupted('canceled', () => new Error('worker draining'));
    plain.finish(2);
    expect(plain.error).toBe('the build was canceled: worker draining');
  });

  it('records a timeout for the rules, and a cancel asked for with its cause', () => {
    const record = new BuildRecord();
    record.interrupted('timeout', () => undefined);
    record.interrupted('stopped', () => undefined);
    expect(record.facts(5)).toEqual({ canceled: false, timedOut: true, errored: false, timeoutMs: 5 });
    record.cancel(new Error('from the API'));
    expect(record.canceled).toBe(true);
    record.start(1);
    record.finish(2);
    expect(record.reportFields()).toMatchObject({ status: 'canceled', error: 'the build was canceled: from the API' });
  });
});
