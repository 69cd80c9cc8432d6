// The kubelet's image step for one container start: the pull-policy decision, pulls through the
// node's serial puller (kube-sim never pulls: a "pull" of a local image takes the slow-pull time),
// the events, the back-off between failed starts, and the image fields of the status.

import { type ContainerSpec } from '../types.ts';
import { type EventSpec } from './event-recorder.ts';
import { containerdImageStatus, fullyQualified, inspectLocalImage, invalidReferenceMessage, isValidReference, type LocalImage } from './images.ts';
import { type ContainerRun, type PodState } from './pod-state.ts';

/** The back-off before the next start of a container after `run.pullFailures` failed starts. */
export function backoffMs(state: PodState, run: ContainerRun): number {
  const { initialMs, maxMs } = state.deps.pullBackoff;
  return Math.min(maxMs, initialMs * 2 ** Math.max(0, run.pullFailures - 1));
}

/**
 * The kubelet's image step (pkg/kubelet/images/image_manager.go EnsureImageExists): decides
 * from the pull policy and the node's images, pulls through the node's serial puller, records
 * the events. Resolves the image record, or the failure (waiting reason and message).
 */
export async function ensureImage(
  state: PodState,
  run: ContainerRun,
  spec: ContainerSpec,
): Promise<{ local: LocalImage } | { reason: string; message: string }> {
  const image = spec.image ?? '';
  const { docker, faults, puller } = state.deps;
  const event = (type: EventSpec['type'], reason: string, message: string): void => state.containerEvent(run, type, reason, message);
  if (!isValidReference(image)) {
    const message = invalidReferenceMessage(image);
    event('Warning', 'InspectFailed', message);
    event('Warning', 'Failed', 'Error: InvalidImageName');
    return { reason: 'InvalidImageName', message };
  }
  const slow = faults.slowPull(image);
  const fault = faults.pullFailure(image);
  const local = fault ? undefined : await inspectLocalImage(docker, image);
  const present = local !== undefined && (slow === undefined || puller.pulled(image));
  const policy = spec.imagePullPolicy ?? 'IfNotPresent';
  if (present && policy !== 'Always') {
    event('Normal', 'Pulled', `Container image "${image}" already present on machine`);
    return { local };
  }
  if (!present && policy === 'Never' && !fault) {
    const message = `Container image "${image}" is not present with pull policy of Never`;
    event('Warning', 'ErrImageNeverPull', message);
    event('Warning', 'Failed', 'Error: ErrImageNeverPull');
    return { reason: 'ErrImageNeverPull', message };
  }
  event('Normal', 'Pulling', `Pulling image "${image}"`);
  const asked = Date.now();
  return puller.queue.run(async () => {
    const started = Date.now();
    if (slow !== undefined && local) await state.pause(slow);
    // A pull cut short by the pod's end leaves no image behind.
    if (state.abort.signal.aborted) return { reason: 'ErrImagePull', message: 'pull cancelled: the pod is terminating' };
    if (fault) {
      const reason = fault.reason === 'ImagePullBackOff' ? 'ErrImagePull' : fault.reason;
      const message = fault.message ?? `rpc error: code = Unknown desc = failed to pull and unpack image "${fullyQualified(image)}": injected by kube-sim`;
      event('Warning', 'Failed', `Failed to pull image "${image}": ${message}`);
      event('Warning', 'Failed', `Error: ${reason}`);
      return { reason, message };
    }
    if (!local) {
      const fq = fullyQualified(image);
      const message = `rpc error: code = NotFound desc = failed to pull and unpack image "${fq}": failed to resolve reference "${fq}": ${fq}: not found (kube-sim never pulls: the image is not present on the node)`;
      event('Warning', 'Failed', `Failed to pull image "${image}": ${message}`);
      event('Warning', 'Failed', 'Error: ErrImagePull');
      return { reason: 'ErrImagePull', message };
    }
    // kube-sim has no registry: a pull of a local image takes the slow-pull time, or none.
    puller.markPulled(image);
    const took = (ms: number): string => `${(ms / 1000).toFixed(3)}s`;
    const now = Date.now();
    event(
      'Normal',
      'Pulled',
      `Successfully pulled image "${image}" in ${took(now - started)} (${took(now - asked)} including waiting). Image size: ${local.size} bytes.`,
    );
    return { local };
  });
}

/** `image`/`imageID` of the status for a container created from `local`. */
export function imageStatus(state: PodState, spec: ContainerSpec, local: LocalImage): { image: string; imageID: string } {
  if (state.deps.behaviour.specImageNames) return { image: fullyQualified(spec.image ?? ''), imageID: local.id };
  return containerdImageStatus(local);
}
