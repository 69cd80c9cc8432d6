/**
 * The build pod as Berth creates it: one pod per build, every container on the pause image until
 * `runContainer` swaps its image in.
 */
import path from 'node:path';
import type { V1Container, V1HostAlias, V1Pod, V1SecurityContext, V1Volume, V1VolumeMount } from '@kubernetes/client-node';
import { type Build, type Container, parseImageReference, type PullPolicy, sanitizeKubernetesName } from '@berth/pipeline';
import { isPrivilegedImage, resourceLabels } from '@berth/runtime';
import { stringify as toYaml } from 'yaml';
import type { PipelinePodTemplate } from './pods-template.ts';

/** Why a pod could not be planned; the runtime turns it into a RuntimeError of `code`. */
export class PlanError extends Error {
  override readonly name = 'PlanError';
  readonly code: 'InvalidConfig';
  constructor(message: string) {
    super(message);
    this.code = 'InvalidConfig';
  }
}

/** One entry of the operator's host-volume allowlist (`src:dst[:ro|rw]`). */
export interface AllowedVolume {
  source: string;
  destination: string;
  writable: boolean;
}

/** What every pod of a runtime shares. */
export interface PodPlanSettings {
  namespace: string;
  workerId: string;
  pauseImage: string;
  workspacePath: string;
  privilegedImages: readonly string[];
  volumes: readonly AllowedVolume[];
  stopGraceMs: number;
  /** The pod's `activeDeadlineSeconds`. */
  activeDeadlineSeconds: number;
  template: PipelinePodTemplate;
}

/** The annotation holding the unabridged build id (labels may be shortened). */
export const BUILD_ID_ANNOTATION = 'berth.dev/build-id';
/** The name of the workspace volume in every pod. */
const WORKSPACE_VOLUME = 'workspace';

/** The pod name of a build: its id as a DNS label. */
export function podNameOf(buildId: string): string {
  return sanitizeKubernetesName(buildId);
}

/** The name of a container in its pod: its id as a DNS label. */
export function containerNameOf(containerId: string): string {
  return sanitizeKubernetesName(containerId);
}

/** Kubernetes' image pull policy for a Vela pull policy (`on_start` pulls when the container starts: `Always`). */
function pullPolicyOf(pull: PullPolicy): 'Always' | 'Never' | 'IfNotPresent' {
  switch (pull) {
    case 'always':
    case 'on_start':
      return 'Always';
    case 'never':
      return 'Never';
    default:
      return 'IfNotPresent';
  }
}

/** Parses the operator's allowlist (`src`, `src:dst`, `src:dst:ro|rw`; read-only unless `rw`). */
export function parseVolumeAllowlist(entries: readonly string[]): AllowedVolume[] {
  return entries.map((entry) => {
    const parts = entry.split(':');
    if (parts.length > 3 || parts.some((part) => part === '')) throw new PlanError(`volume ${JSON.stringify(entry)} is not src[:dst[:ro|rw]]`);
    const [source = '', destination = source, mode = 'ro'] = parts;
    if (mode !== 'ro' && mode !== 'rw') throw new PlanError(`volume ${JSON.stringify(entry)} has access mode ${JSON.stringify(mode)}; use ro or rw`);
    if (!path.posix.isAbsolute(source) || !path.posix.isAbsolute(destination)) throw new PlanError(`volume ${JSON.stringify(entry)} must use absolute paths`);
    return { source: normalise(source), destination: normalise(destination), writable: mode === 'rw' };
  });
}

/** The normalised image reference a container runs (what `runContainer` patches in), or a PlanError. */
export function imageOf(container: Pick<Container, 'id' | 'image'>): string {
  const parsed = parseImageReference(container.image);
  if (!parsed.ok) throw new PlanError(`image ${JSON.stringify(container.image)} of ${container.id} is not a valid reference: ${parsed.error}`);
  return parsed.reference.normalized;
}

const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

interface PlannedContainer {
  container: Container;
  name: string;
  spec: V1Container;
}

/**
 * The pod of one build, filled in by setupBuild, createNetwork, createVolume and setupContainer,
 * and turned into the object to create by {@link PodPlan.toPod} at assembleBuild.
 *
 * Gotcha: environment and arguments are read from the containers at {@link PodPlan.toPod}, not when
 * they were set up, as Vela does: the executor may still extend a container's environment in between.
 */
export class PodPlan {
  readonly buildId: string;
  readonly podName: string;
  readonly settings: PodPlanSettings;
  readonly #containers = new Map<string, PlannedContainer>();
  readonly #names = new Set<string>();
  readonly #hostVolumes = new Map<string, string>();
  #hostAliases: V1HostAlias[] = [];
  #workspace = false;

  constructor(build: Build, settings: PodPlanSettings) {
    this.buildId = build.id;
    this.podName = podNameOf(build.id);
    this.settings = settings;
  }

  /** Host names for the build's services and detached steps (`name` and `name.local`, as Vela), all on 127.0.0.1. */
  addHostAliases(build: Build): void {
    const names = new Set<string>();
    const add = (container: Container): void => {
      for (const host of [container.name, `${container.name}.local`]) {
        if (host.length <= 253 && DNS_SUBDOMAIN.test(host)) names.add(host);
      }
    };
    build.services.forEach(add);
    build.steps.filter((s) => s.detach).forEach(add);
    build.stages.forEach((stage) => stage.steps.filter((s) => s.detach).forEach(add));
    this.#hostAliases = names.size > 0 ? [{ ip: '127.0.0.1', hostnames: [...names] }] : [];
  }

  /** Adds the build's workspace: an emptyDir mounted at the workspace path in every container. */
  addWorkspace(): void {
    this.#workspace = true;
  }

  /** True when `containerId` was added. */
  has(containerId: string): boolean {
    return this.#containers.has(containerId);
  }

  /** The container's name in the pod, if it was added. */
  containerName(containerId: string): string | undefined {
    return this.#containers.get(containerId)?.name;
  }

  /** Every added container id with its pod container name, in pod order. */
  containers(): { id: string; name: string; container: Container }[] {
    return [...this.#containers.values()].map((c) => ({ id: c.container.id, name: c.name, container: c.container }));
  }

  /**
   * Adds a container on the pause image. Throws a PlanError for an invalid image reference, a
   * volume outside the allowlist, a non-numeric user, or a name clash.
   */
  addContainer(container: Container): string {
    imageOf(container);
    const name = containerNameOf(container.id);
    const existing = this.#containers.get(container.id);
    if (existing === undefined && this.#names.has(name))
      throw new PlanError(`container ${container.id} maps to pod container name ${name}, which another container has`);
    const securityContext: V1SecurityContext = {};
    if (container.privileged && isPrivilegedImage(container.image, this.settings.privilegedImages)) securityContext.privileged = true;
    const capabilities = this.settings.template.spec.container?.securityContext?.capabilities;
    if (capabilities) securityContext.capabilities = structuredClone(capabilities);
    if (container.user !== '') Object.assign(securityContext, userOf(container));
    const spec: V1Container = {
      name,
      image: this.settings.pauseImage,
      imagePullPolicy: pullPolicyOf(container.pull),
      ...(container.directory ? { workingDir: container.directory } : {}),
      volumeMounts: this.#volumeMounts(container),
      securityContext,
      stdin: false,
      tty: false,
    };
    this.#containers.set(container.id, { container, name, spec });
    this.#names.add(name);
    return name;
  }

  #volumeMounts(container: Container): V1VolumeMount[] {
    const mounts: V1VolumeMount[] = [];
    for (const volume of container.volumes) {
      const source = volume.source && path.posix.isAbsolute(volume.source) ? normalise(volume.source) : undefined;
      const entry =
        source === undefined
          ? undefined
          : this.settings.volumes.find((allowed) => source === allowed.source || source.startsWith(`${allowed.source === '/' ? '' : allowed.source}/`));
      if (source === undefined || entry === undefined) {
        throw new PlanError(`volume ${JSON.stringify(volume.source)} of ${container.id} is not in the runtime's allowed volumes`);
      }
      const destination = volume.destination ? volume.destination : entry.destination;
      if (!path.posix.isAbsolute(destination)) throw new PlanError(`volume destination ${JSON.stringify(destination)} of ${container.id} must be absolute`);
      let volumeName = this.#hostVolumes.get(source);
      if (volumeName === undefined) {
        volumeName = `host-${this.#hostVolumes.size}`;
        this.#hostVolumes.set(source, volumeName);
      }
      mounts.push({ name: volumeName, mountPath: normalise(destination), readOnly: volume.access_mode === 'ro' || !entry.writable });
    }
    return mounts;
  }

  /** The pod to create, with every container's environment and arguments as they are now. */
  toPod(): V1Pod {
    const { template } = this.settings;
    const labels = { ...template.metadata.labels, ...resourceLabels(this.settings.workerId, this.buildId) };
    const annotations = { ...template.metadata.annotations, [BUILD_ID_ANNOTATION]: this.buildId };
    const volumes: V1Volume[] = [];
    if (this.#workspace) volumes.push({ name: WORKSPACE_VOLUME, emptyDir: {} });
    for (const [source, name] of this.#hostVolumes) volumes.push({ name, hostPath: { path: source } });
    const containers = [...this.#containers.values()].map(({ container, spec }) => {
      const args = [...container.entrypoint, ...container.commands];
      const volumeMounts = [...(this.#workspace ? [{ name: WORKSPACE_VOLUME, mountPath: this.settings.workspacePath }] : []), ...(spec.volumeMounts ?? [])];
      return {
        ...spec,
        // Args only, as Vela: the pause image's entrypoint ignores them, and an image without an
        // entrypoint runs them as its command line.
        ...(args.length > 0 ? { args } : {}),
        env: Object.entries(container.environment).map(([name, value]) => ({ name, value })),
        volumeMounts,
      };
    });
    const spec: V1Pod['spec'] = {
      restartPolicy: 'Never',
      activeDeadlineSeconds: this.settings.activeDeadlineSeconds,
      terminationGracePeriodSeconds: Math.max(0, Math.ceil(this.settings.stopGraceMs / 1000)),
      containers,
      ...(volumes.length > 0 ? { volumes } : {}),
      ...(this.#hostAliases.length > 0 ? { hostAliases: this.#hostAliases } : {}),
    };
    if (template.spec.nodeSelector) spec.nodeSelector = { ...template.spec.nodeSelector };
    if (template.spec.tolerations) spec.tolerations = structuredClone(template.spec.tolerations);
    if (template.spec.affinity) spec.affinity = structuredClone(template.spec.affinity);
    if (template.spec.dnsPolicy) spec.dnsPolicy = template.spec.dnsPolicy;
    if (template.spec.dnsConfig) spec.dnsConfig = structuredClone(template.spec.dnsConfig);
    if (template.spec.securityContext) spec.securityContext = structuredClone(template.spec.securityContext);
    return {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: this.podName, namespace: this.settings.namespace, labels, annotations },
      spec,
    };
  }

  /** The pod as YAML for the init step's log, with environment values hidden (they may hold secrets). */
  describe(): string {
    const pod = this.toPod();
    for (const container of pod.spec?.containers ?? []) {
      container.env = container.env?.map((e) => ({ name: e.name, value: '<hidden>' }));
    }
    return toYaml(pod);
  }
}

function userOf(container: Container): Pick<V1SecurityContext, 'runAsUser' | 'runAsGroup'> {
  const [user = '', group] = container.user.split(':');
  const id = (value: string): number | undefined => (value === 'root' ? 0 : /^\d+$/.test(value) ? Number(value) : undefined);
  const runAsUser = id(user);
  const runAsGroup = group === undefined ? undefined : id(group);
  if (runAsUser === undefined || (group !== undefined && runAsGroup === undefined)) {
    throw new PlanError(`user ${JSON.stringify(container.user)} of ${container.id}: Kubernetes needs a numeric uid[:gid] (or root)`);
  }
  return runAsGroup === undefined ? { runAsUser } : { runAsUser, runAsGroup };
}

function normalise(p: string): string {
  const clean = path.posix.normalize(p);
  return clean.length > 1 && clean.endsWith('/') ? clean.slice(0, -1) : clean;
}
