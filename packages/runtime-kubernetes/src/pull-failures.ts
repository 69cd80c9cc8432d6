/**
 * What a container's waiting reason means for its step: Kubernetes reports an image it cannot pull
 * as a waiting container, not as an error, so the runtime decides when waiting becomes failing.
 */
import type { RuntimeErrorCode } from '@berth/runtime';

/** How one waiting reason is handled. */
export interface WaitingReasonPolicy {
  /** `now`: the step fails at once. `grace`: after the pull grace, unless the container starts meanwhile. */
  when: 'now' | 'grace';
  /** The RuntimeError code `waitContainer` rejects with. */
  code: RuntimeErrorCode;
}

/**
 * The table (compare Buildkite's agent-stack-k8s and GitLab Runner). Reasons not listed (e.g.
 * `ContainerCreating`, `PodInitializing`) are ordinary progress.
 */
export const WAITING_REASONS: Readonly<Record<string, WaitingReasonPolicy>> = {
  InvalidImageName: { when: 'now', code: 'InvalidConfig' },
  ErrImagePull: { when: 'grace', code: 'ImagePullFailed' },
  ImagePullBackOff: { when: 'grace', code: 'ImagePullFailed' },
  ErrImageNeverPull: { when: 'grace', code: 'ImageNotFound' },
  CreateContainerConfigError: { when: 'grace', code: 'InvalidConfig' },
  CreateContainerError: { when: 'grace', code: 'ContainerFailed' },
  RunContainerError: { when: 'grace', code: 'ContainerFailed' },
  ImageInspectError: { when: 'grace', code: 'ImagePullFailed' },
  RegistryUnavailable: { when: 'grace', code: 'ImagePullFailed' },
  SignatureValidationFailed: { when: 'grace', code: 'ImagePullFailed' },
};

const NOT_FOUND = /not found|manifest unknown|does not exist|no such image|pull access denied|repository .* not found|name unknown/i;

/**
 * The code for a pull failure: `ErrImagePull`/`ImagePullBackOff` become `ImageNotFound` when the
 * kubelet's message says the image does not exist, `ImagePullFailed` otherwise.
 */
export function failureCodeOf(reason: string, message: string): RuntimeErrorCode | undefined {
  const policy = WAITING_REASONS[reason];
  if (!policy) return undefined;
  if ((reason === 'ErrImagePull' || reason === 'ImagePullBackOff') && NOT_FOUND.test(message)) return 'ImageNotFound';
  return policy.code;
}

/** Event reasons the kubelet uses for pull trouble of a container (`Failed` also covers other failures: see {@link isPullEvent}). */
const PULL_EVENT_REASONS = new Set(['Failed', 'BackOff', 'ErrImageNeverPull', 'InspectFailed']);

/** True for a kubelet event about a failing image pull or container creation (not a crash back-off). */
export function isPullEvent(reason: string, message: string): boolean {
  if (!PULL_EVENT_REASONS.has(reason)) return false;
  if (reason === 'BackOff') return /pulling image/i.test(message);
  return true;
}

/**
 * The image a kubelet event's message names: `Failed to pull image "x": …`, `Back-off pulling image
 * "x"`, `Container image "x" is not present with pull policy of Never`, `Failed to apply default image
 * tag "x": …` (pkg/kubelet/images/image_manager.go, EnsureImageExists). Undefined when it names none.
 */
export function imageNamedIn(message: string): string | undefined {
  return /\bimage(?: tag)? "([^"]+)"/.exec(message)?.[1];
}

/**
 * The waiting reason a kubelet event stands for, or undefined when it is no pull or creation failure.
 * `Error: <text>` events that name no pull reason come from generateContainerConfig or CreateContainer
 * (pkg/kubelet/kuberuntime/kuberuntime_container.go, startContainer: `Error: secret "x" not found`):
 * they are configuration errors, not missing images.
 */
export function pullReasonOfEvent(reason: string, message: string): string | undefined {
  if (!isPullEvent(reason, message)) return undefined;
  if (reason === 'InspectFailed') return 'InvalidImageName';
  if (reason === 'ErrImageNeverPull') return 'ErrImageNeverPull';
  if (reason === 'BackOff') return 'ImagePullBackOff';
  const named = /^Error: (\w+)$/.exec(message)?.[1];
  if (named !== undefined && WAITING_REASONS[named]) return named;
  if (/^Failed to pull image/i.test(message)) return 'ErrImagePull';
  if (/^Error: /.test(message)) return 'CreateContainerConfigError';
  return 'ErrImagePull';
}
