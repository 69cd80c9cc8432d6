import { describe, expect, it } from 'vitest';
import { isRuntimeError, RuntimeError } from './errors.ts';

describe('RuntimeError', () => {
  it('names runtime, operation and subject in its message and keeps the cause', () => {
    const cause = new Error('connect ENOENT /var/run/docker.sock');
    const error = new RuntimeError('Unavailable', 'the Docker engine does not answer', {
      runtime: 'docker',
      operation: 'runContainer',
      subject: 'step_a_b_1_test',
      cause,
    });
    expect(error.message).toBe('[docker] runContainer step_a_b_1_test: the Docker engine does not answer');
    expect(error.detail).toBe('the Docker engine does not answer');
    expect(error.cause).toBe(cause);
    expect(error.name).toBe('RuntimeError');
  });

  it('is recognised by code', () => {
    const error = new RuntimeError('ImageNotFound', 'no such image', { runtime: 'dummy', operation: 'setupContainer' });
    expect(isRuntimeError(error)).toBe(true);
    expect(isRuntimeError(error, 'ImageNotFound', 'ImagePullFailed')).toBe(true);
    expect(isRuntimeError(error, 'Unavailable')).toBe(false);
    expect(isRuntimeError(new Error('x'))).toBe(false);
  });
});
