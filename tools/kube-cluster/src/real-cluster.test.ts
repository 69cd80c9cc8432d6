import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { realCluster } from './real-cluster.ts';

describe('realCluster', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'berth-kube-cluster-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'berth.kubeconfig');
  writeFileSync(file, 'apiVersion: v1\nkind: Config\n');

  it('reads the kubeconfig BERTH_REAL_KUBECONFIG names', () => {
    expect(realCluster({ BERTH_REAL_KUBECONFIG: file })).toEqual({ kubeconfig: 'apiVersion: v1\nkind: Config\n' });
  });

  it('skips with the way to run it when nothing is set and the lane is not required', () => {
    const cluster = realCluster({});
    expect(cluster.kubeconfig).toBeUndefined();
    expect(cluster.skip).toMatch(/BERTH_REAL_KUBECONFIG is not set; start one with `bash tools\/kube-cluster\/cluster.sh start`/);
  });

  it('fails with the reason when the lane is required and the kubeconfig is missing', () => {
    expect(() => realCluster({ BERTH_REAL_CLUSTER: 'required' })).toThrow(/required \(BERTH_REAL_CLUSTER=required\) but BERTH_REAL_KUBECONFIG is not set/);
    expect(() => realCluster({ BERTH_REAL_CLUSTER: 'required', BERTH_REAL_KUBECONFIG: path.join(dir, 'nope') })).toThrow(/which does not exist/);
  });
});
