// Translates a pod and its containers into Docker create options, as dockershim did: a pause
// container owns the network (and IPC) namespace, hostAliases become its ExtraHosts, and every
// container joins it with `container:<pause id>`.

import type Docker from 'dockerode';
import { type ContainerSpec, type Pod } from '../types.ts';

/** Label put on every Docker object kube-sim creates; its value is the instance id. */
export const instanceLabel = 'berth.kube-sim/instance';

/** Create options split so that dockerode sends only the name in the query string. */
export interface CreateRequest {
  _query: { name: string };
  _body: Docker.ContainerCreateOptions;
}

function podLabels(instance: string, pod: Pod): Record<string, string> {
  return {
    [instanceLabel]: instance,
    'berth.kube-sim/pod-name': pod.metadata.name ?? '',
    'berth.kube-sim/pod-namespace': pod.metadata.namespace ?? '',
    'berth.kube-sim/pod-uid': pod.metadata.uid ?? '',
  };
}

/** The Docker volume name for an emptyDir of a pod. */
export function volumeName(pod: Pod, volume: string): string {
  return `kube-sim_${pod.metadata.uid ?? ''}_${volume}`;
}

/** Labels for a pod's Docker volumes. */
export function volumeLabels(instance: string, pod: Pod): Record<string, string> {
  return podLabels(instance, pod);
}

/** The pause (sandbox) container of a pod. */
export function sandboxRequest(instance: string, pod: Pod, pauseImage: string): CreateRequest {
  const extraHosts = (pod.spec.hostAliases ?? []).flatMap((h) => (h.hostnames ?? []).map((name) => `${name}:${h.ip}`));
  return {
    _query: { name: `k8s_POD_${pod.metadata.name ?? ''}_${pod.metadata.namespace ?? ''}_${pod.metadata.uid ?? ''}_0` },
    _body: {
      Image: pauseImage,
      Hostname: (pod.metadata.name ?? 'pod').slice(0, 63),
      Labels: { ...podLabels(instance, pod), 'berth.kube-sim/container': 'POD' },
      HostConfig: { ExtraHosts: extraHosts, IpcMode: 'shareable', NetworkMode: 'bridge' },
    },
  };
}

const units: Record<string, number> = {
  '': 1,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  Ki: 1024,
  Mi: 1024 ** 2,
  Gi: 1024 ** 3,
  Ti: 1024 ** 4,
};

/** Parses a Kubernetes memory quantity (`64Mi`, `1G`, `1048576`) to bytes; undefined when unparsable. */
function memoryBytes(quantity: string | number | undefined): number | undefined {
  if (quantity === undefined) return undefined;
  if (typeof quantity === 'number') return quantity;
  const m = /^(\d+(?:\.\d+)?)([kMGT]i?|Ki)?$/.exec(quantity.trim());
  if (!m) return undefined;
  const unit = units[m[2] ?? ''];
  return unit === undefined ? undefined : Math.floor(Number(m[1]) * unit);
}

/** A container of a pod, joined to the pause container's namespaces. */
export function containerRequest(instance: string, pod: Pod, c: ContainerSpec, image: string, pauseId: string, restartCount: number): CreateRequest {
  const mounts: Docker.MountSettings[] = [];
  for (const m of c.volumeMounts ?? []) {
    const volume = (pod.spec.volumes ?? []).find((v) => v.name === m.name);
    if (!volume) continue;
    if (volume.emptyDir) {
      if (volume.emptyDir.medium === 'Memory') mounts.push({ Type: 'tmpfs', Source: '', Target: m.mountPath, ReadOnly: m.readOnly ?? false });
      else mounts.push({ Type: 'volume', Source: volumeName(pod, m.name), Target: m.mountPath, ReadOnly: m.readOnly ?? false });
    } else if (volume.hostPath) {
      mounts.push({ Type: 'bind', Source: volume.hostPath.path, Target: m.mountPath, ReadOnly: m.readOnly ?? false });
    }
  }
  const user = c.securityContext?.runAsUser ?? pod.spec.securityContext?.runAsUser;
  const group = c.securityContext?.runAsGroup ?? pod.spec.securityContext?.runAsGroup;
  const memory = memoryBytes(c.resources?.limits?.memory);
  const body: Docker.ContainerCreateOptions = {
    Image: image,
    Env: (c.env ?? []).filter((e) => e.name).map((e) => `${e.name}=${e.value ?? ''}`),
    Labels: { ...podLabels(instance, pod), 'berth.kube-sim/container': c.name, 'berth.kube-sim/restart-count': String(restartCount) },
    Tty: false,
    OpenStdin: c.stdin === true,
    StdinOnce: c.stdinOnce === true,
    HostConfig: {
      NetworkMode: `container:${pauseId}`,
      IpcMode: `container:${pauseId}`,
      Privileged: c.securityContext?.privileged === true,
      Mounts: mounts,
      ...(memory !== undefined ? { Memory: memory } : {}),
    },
  };
  if (c.command && c.command.length > 0) body.Entrypoint = c.command;
  if (c.args && c.args.length > 0) body.Cmd = c.args;
  else if (c.command && c.command.length > 0) body.Cmd = [];
  if (c.workingDir) body.WorkingDir = c.workingDir;
  if (user !== undefined) body.User = group !== undefined ? `${user}:${group}` : String(user);
  return {
    _query: { name: `k8s_${c.name}_${pod.metadata.name ?? ''}_${pod.metadata.namespace ?? ''}_${pod.metadata.uid ?? ''}_${restartCount}` },
    _body: body,
  };
}
