/**
 * Images (go-vela/worker runtime/kubernetes/image.go): the kubelet pulls them when a container
 * starts, so the runtime only checks the reference and says where the image will be.
 */
import type { Context } from '@berth/context';
import type { Container } from '@berth/pipeline';
import { imageOf } from '../pod-spec.ts';
import { planError, type RuntimeState } from './state.ts';

/** Checks the container's image reference; the kubelet pulls it (`Runtime.createImage`). */
export async function createImage(s: RuntimeState, ctx: Context, container: Container): Promise<void> {
  const where = { operation: 'createImage', subject: container.id };
  s.live(ctx, where);
  try {
    imageOf(container);
  } catch (error) {
    throw planError(error, where);
  }
  // The kubelet pulls when the container starts (the pull policy is on the pod spec).
  return Promise.resolve();
}

/** The container's image as the pod will carry it, as the init log shows it (`Runtime.inspectImage`). */
export async function inspectImage(s: RuntimeState, ctx: Context, container: Container): Promise<string> {
  const where = { operation: 'inspectImage', subject: container.id };
  s.live(ctx, where);
  let image: string;
  try {
    image = imageOf(container);
  } catch (error) {
    throw planError(error, where);
  }
  const state = s.containers.get(container.id);
  const name = state?.plan.containerName(container.id) ?? container.id;
  const podName = state?.plan.podName ?? '<pod>';
  return Promise.resolve(
    `$ kubectl get pod ${podName} -o=jsonpath='{.spec.containers[?(@.name=="${name}")].image}'\n${image} (pulled by the kubelet when the step starts, pull policy ${container.pull})\n`,
  );
}
