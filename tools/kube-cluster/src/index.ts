/**
 * @berth/kube-cluster: what Berth's tests read of the real single-node cluster that
 * `tools/kube-cluster/cluster.sh` starts (its kubeconfig, and whether the lane is required).
 *
 * @packageDocumentation
 */
export { realCluster, type RealCluster } from './real-cluster.ts';
export { type AuditEvent, readAudit } from './audit.ts';
