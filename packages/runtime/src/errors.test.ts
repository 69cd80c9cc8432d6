import { copyFile, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type * as errors from './errors.ts';
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

describe('RuntimeError across copies of the package', () => {
  // A plugin built against its own installed @berth/runtime and a worker bundling another copy:
  // two physical copies of the module, each with its own class.
  let copy: typeof errors;
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'berth-runtime-copy-'));
    await copyFile(path.join(import.meta.dirname, 'errors.ts'), path.join(dir, 'errors.ts'));
    copy = (await import(pathToFileURL(path.join(dir, 'errors.ts')).href)) as typeof errors;
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('is a distinct class in the copy', () => {
    expect(copy.RuntimeError).not.toBe(RuntimeError);
  });

  it('recognises the other copy’s error by its brand and code, both ways', () => {
    const fromPlugin = new copy.RuntimeError('InvalidConfig', 'bad option', { runtime: 'mini', operation: 'create' });
    expect(isRuntimeError(fromPlugin)).toBe(true);
    expect(isRuntimeError(fromPlugin, 'InvalidConfig')).toBe(true);
    expect(isRuntimeError(fromPlugin, 'Unavailable')).toBe(false);
    const fromWorker = new RuntimeError('NotFound', 'gone', { runtime: 'docker', operation: 'inspectContainer' });
    expect(copy.isRuntimeError(fromWorker, 'NotFound')).toBe(true);
  });

  it('keeps instanceof working across copies', () => {
    const fromPlugin = new copy.RuntimeError('InvalidConfig', 'bad option', { runtime: 'mini', operation: 'create' });
    expect(fromPlugin instanceof RuntimeError).toBe(true);
    expect(new RuntimeError('Internal', 'x', { runtime: 'a', operation: 'b' }) instanceof copy.RuntimeError).toBe(true);
    expect(fromPlugin instanceof Error).toBe(true);
  });

  it('is not fooled by a look-alike without the brand', () => {
    const lookalike = Object.assign(new Error('x'), { name: 'RuntimeError', code: 'NotFound', detail: 'x' });
    expect(isRuntimeError(lookalike)).toBe(false);
    expect(lookalike instanceof RuntimeError).toBe(false);
    expect(isRuntimeError(null)).toBe(false);
    expect(isRuntimeError('RuntimeError')).toBe(false);
  });

  it('keeps instanceof of a subclass by class', () => {
    class PluginError extends RuntimeError {}
    const sub = new PluginError('Internal', 'x', { runtime: 'a', operation: 'b' });
    expect(sub instanceof PluginError).toBe(true);
    expect(sub instanceof RuntimeError).toBe(true);
    expect(new RuntimeError('Internal', 'x', { runtime: 'a', operation: 'b' }) instanceof PluginError).toBe(false);
  });
});
