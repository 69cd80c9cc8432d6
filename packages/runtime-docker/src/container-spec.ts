/**
 * The engine's create request for one container (POST /containers/create): image, environment,
 * mounts (workspace, outputs, the operator's allowed bind mounts), ulimits, privilege and limits.
 */
import type { Build, Container } from '@berth/pipeline';
import { isPrivilegedImage, OUTPUTS_PATH, resourceLabels } from '@berth/runtime';
import { runtimeError, type Where } from './errors.ts';
import type { ResolvedImage } from './image-ref.ts';
import { type AllowedVolume, type BindMount, resolveBindMounts } from './volumes.ts';

/** Resource limits and hardening applied to every container, from the plugin's options. */
export interface ContainerLimits {
  /** CPUs per container (`HostConfig.NanoCpus`), e.g. `1.5`. */
  cpus?: number;
  /** Memory per container in bytes (`HostConfig.Memory`). */
  memoryBytes?: number;
  /** Capabilities dropped from every container (`HostConfig.CapDrop`), e.g. `['NET_RAW']`. */
  dropCapabilities?: string[];
  /** Maximum number of processes per container (`HostConfig.PidsLimit`). */
  pidsLimit?: number;
}

const KNOWN_ULIMITS = new Set([
  'core',
  'cpu',
  'data',
  'fsize',
  'locks',
  'memlock',
  'msgqueue',
  'nice',
  'nofile',
  'nproc',
  'rss',
  'rtprio',
  'rttime',
  'sigpending',
  'stack',
]);

/** A name the engine accepts for a container, network or volume: `[a-zA-Z0-9][a-zA-Z0-9_.-]*`. Valid ids are kept as they are. */
export function engineName(id: string): string {
  const clean = id.replace(/[^a-zA-Z0-9_.-]/g, '-');
  return /^[a-zA-Z0-9]/.test(clean) ? clean : `x${clean}`;
}

/** The engine's name of a build's outputs volume. */
export function outputsVolumeName(buildId: string): string {
  return `${engineName(buildId)}_outputs`;
}

/** What {@link containerCreateBody} needs of the runtime and the build. */
export interface CreateBodySpec {
  container: Container;
  build: Build;
  image: ResolvedImage;
  where: Where;
  workerId: string;
  /** The operator's allowed host paths (VELA_RUNTIME_VOLUMES). */
  allowlist: readonly AllowedVolume[];
  privilegedImages: readonly string[];
  /** The operator's host directory mounted as the workspace (berth exec), if any. */
  workspaceHostPath: string | undefined;
  workspacePath: string;
  /** The build has its volume, its outputs volume, its network. */
  hasVolume: boolean;
  hasOutputs: boolean;
  joinsNetwork: boolean;
  limits: ContainerLimits;
  /** Reports a notice event about the container (e.g. privilege refused). */
  notice: (reason: string, message: string) => void;
}

/** The create request's body; throws an `InvalidConfig` RuntimeError for a refused mount or a bad ulimit. */
export function containerCreateBody(spec: CreateBodySpec): Record<string, unknown> {
  const { container, build, image, where, limits } = spec;
  const { mounts, refused } = resolveBindMounts(container.volumes, spec.allowlist);
  if (refused.length > 0) {
    const list = refused.map((v) => `${v.source}:${v.destination}${v.access_mode ? `:${v.access_mode}` : ''}`).join(', ');
    throw runtimeError(
      'InvalidConfig',
      `volume ${list} is not allowed on this worker: only host paths in the operator's volume allowlist (VELA_RUNTIME_VOLUMES) may be mounted`,
      where,
    );
  }
  for (const ulimit of container.ulimits) {
    if (!KNOWN_ULIMITS.has(ulimit.name)) {
      throw runtimeError('InvalidConfig', `ulimit ${JSON.stringify(ulimit.name)} is unknown; use one of ${[...KNOWN_ULIMITS].join(', ')}`, where);
    }
    if (ulimit.hard !== 0 && ulimit.soft > ulimit.hard) {
      throw runtimeError('InvalidConfig', `ulimit ${ulimit.name}: soft limit ${ulimit.soft} is above hard limit ${ulimit.hard}`, where);
    }
  }
  // Privileged only when the step asks and the operator allows the image (Vela grants it to every allowlisted image).
  const allowed = isPrivilegedImage(container.image, spec.privilegedImages);
  const privileged = container.privileged && allowed;
  if (container.privileged && !allowed) {
    spec.notice('NotPrivileged', `image ${image.reference} is not in the worker's privileged images, so the container runs unprivileged`);
  }
  // The workspace: the operator's host directory (berth exec runs on the current directory),
  // else the build's volume.
  const workspace: Record<string, unknown>[] = spec.workspaceHostPath
    ? [{ Type: 'bind', Source: spec.workspaceHostPath, Target: spec.workspacePath }]
    : spec.hasVolume
      ? [{ Type: 'volume', Source: engineName(build.id), Target: spec.workspacePath }]
      : [];
  const outputs: Record<string, unknown>[] = spec.hasOutputs ? [{ Type: 'volume', Source: outputsVolumeName(build.id), Target: OUTPUTS_PATH }] : [];
  const hostConfig: Record<string, unknown> = {
    LogConfig: { Type: 'json-file', Config: {} },
    Privileged: privileged,
    Mounts: [...workspace, ...outputs, ...(mounts satisfies BindMount[])],
    Ulimits: container.ulimits.map((u) => ({ Name: u.name, Soft: u.soft, Hard: u.hard || u.soft })),
    ...(limits.dropCapabilities?.length ? { CapDrop: limits.dropCapabilities } : {}),
    ...(limits.memoryBytes ? { Memory: limits.memoryBytes } : {}),
    ...(limits.cpus ? { NanoCpus: Math.round(limits.cpus * 1e9) } : {}),
    ...(limits.pidsLimit ? { PidsLimit: limits.pidsLimit } : {}),
  };
  const network = engineName(build.id);
  const joins = spec.joinsNetwork;
  if (joins) hostConfig.NetworkMode = network;
  return {
    Image: image.reference,
    Env: Object.entries(container.environment).map(([key, value]) => `${key}=${value}`),
    ...(container.entrypoint.length > 0 ? { Entrypoint: container.entrypoint } : {}),
    ...(container.commands.length > 0 ? { Cmd: container.commands } : {}),
    ...(container.directory ? { WorkingDir: container.directory } : {}),
    ...(container.user ? { User: container.user } : {}),
    Labels: resourceLabels(spec.workerId, build.id, container.id),
    AttachStdin: false,
    AttachStdout: true,
    AttachStderr: true,
    Tty: false,
    OpenStdin: false,
    HostConfig: hostConfig,
    ...(joins ? { NetworkingConfig: { EndpointsConfig: { [network]: { Aliases: [container.name || container.id] } } } } : {}),
  };
}
