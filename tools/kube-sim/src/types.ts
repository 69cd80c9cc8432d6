// The few Kubernetes object shapes kube-sim reads and writes. Deliberately loose: objects are
// stored as the JSON the client sent (plus defaults), so unknown fields survive round trips.

/** Object metadata as kube-sim stores it. */
interface ObjectMeta {
  name?: string;
  generateName?: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  deletionGracePeriodSeconds?: number;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  [key: string]: unknown;
}

/** Any stored API object. */
export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata: ObjectMeta;
  [key: string]: unknown;
}

/** The parts of a container spec the node agent honours. */
export interface ContainerSpec {
  name: string;
  image?: string;
  imagePullPolicy?: string;
  command?: string[];
  args?: string[];
  workingDir?: string;
  env?: { name: string; value?: string; valueFrom?: unknown }[];
  volumeMounts?: { name: string; mountPath: string; readOnly?: boolean }[];
  securityContext?: { privileged?: boolean; runAsUser?: number; runAsGroup?: number };
  resources?: { limits?: Record<string, string | number>; requests?: Record<string, string | number> };
  [key: string]: unknown;
}

/** The parts of a pod spec the node agent honours. */
interface PodSpec {
  containers: ContainerSpec[];
  initContainers?: ContainerSpec[];
  restartPolicy?: string;
  nodeName?: string;
  nodeSelector?: Record<string, string>;
  activeDeadlineSeconds?: number;
  terminationGracePeriodSeconds?: number;
  hostAliases?: { ip: string; hostnames?: string[] }[];
  volumes?: { name: string; emptyDir?: { medium?: string; sizeLimit?: string }; hostPath?: { path: string }; [key: string]: unknown }[];
  securityContext?: { runAsUser?: number; runAsGroup?: number };
  [key: string]: unknown;
}

/** A container state as the kubelet reports it (exactly one key set). */
export interface ContainerState {
  waiting?: { reason: string; message?: string };
  running?: { startedAt: string };
  terminated?: {
    exitCode: number;
    signal?: number;
    reason: string;
    message?: string;
    startedAt?: string | null;
    finishedAt?: string | null;
    containerID?: string;
  };
}

/** A container status as the kubelet reports it. */
export interface ContainerStatus {
  name: string;
  state: ContainerState;
  lastState: ContainerState;
  ready: boolean;
  restartCount: number;
  image: string;
  imageID: string;
  containerID?: string;
  started: boolean;
}

/** A pod condition. */
export interface PodCondition {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  lastProbeTime: string | null;
  lastTransitionTime: string;
  reason?: string;
  message?: string;
}

/** Pod status as the kubelet reports it. */
export interface PodStatus {
  phase: string;
  conditions?: PodCondition[];
  message?: string;
  reason?: string;
  hostIP?: string;
  hostIPs?: { ip: string }[];
  podIP?: string;
  podIPs?: { ip: string }[];
  startTime?: string;
  containerStatuses?: ContainerStatus[];
  qosClass?: string;
  [key: string]: unknown;
}

/** A pod. */
export interface Pod extends KubeObject {
  spec: PodSpec;
  status?: PodStatus;
}

/** A core/v1 event. */
export interface CoreEvent extends KubeObject {
  involvedObject: {
    kind?: string;
    namespace?: string;
    name?: string;
    uid?: string;
    apiVersion?: string;
    resourceVersion?: string;
    fieldPath?: string;
  };
  reason?: string;
  message?: string;
  type?: string;
  count?: number;
  firstTimestamp?: string | null;
  lastTimestamp?: string | null;
  eventTime?: string | null;
  source?: { component?: string; host?: string };
  reportingComponent?: string;
  reportingInstance?: string;
}

/** Deep copy of a JSON value. */
export function clone<T>(value: T): T {
  return structuredClone(value);
}

/** The current time as the API server serialises it (RFC 3339, whole seconds). */
export function nowSeconds(date = new Date()): string {
  return date.toISOString().replace(/\.\d+Z$/, 'Z');
}
