import { background } from '@berth/context';
import { isRuntimeError } from '@berth/runtime';
import { describe, expect, it } from 'vitest';
import { kubernetesRuntime } from './index.ts';

describe('kubernetesRuntime().create', () => {
  it('refuses a host directory as the workspace with InvalidConfig, before reaching any cluster', async () => {
    const error: unknown = await kubernetesRuntime({ kubeconfig: '/nonexistent/kubeconfig' })
      .create(background(), { workerId: 'w', workspaceHostPath: '/tmp' })
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(isRuntimeError(error, 'InvalidConfig')).toBe(true);
    expect((error as Error).message).toMatch(/cannot mount the worker's directory \/tmp/);
  });
});
