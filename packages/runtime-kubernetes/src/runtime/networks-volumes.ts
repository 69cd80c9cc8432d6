/**
 * The build's network and volume (go-vela/worker runtime/kubernetes/network.go, volume.go): on
 * Kubernetes they are parts of the pod (its host aliases, its workspace volume), planned before the
 * pod is created and gone with it. Each step comes for both at once (create, inspect, remove),
 * as the executor calls them.
 */
import type { Context } from '@berth/context';
import type { Build } from '@berth/pipeline';
import { stringify as toYaml } from 'yaml';
import type { PodPlan } from '../pod-spec.ts';
import type { RuntimeState } from './state.ts';

/** Plans the pod's host aliases: the services and detached steps by their names, on 127.0.0.1 (`Runtime.createNetwork`). */
export async function createNetwork(s: RuntimeState, ctx: Context, build: Build): Promise<void> {
  planOf(s, ctx, build, 'createNetwork').addHostAliases(build);
  return Promise.resolve();
}

/** Plans the pod's workspace: an emptyDir mounted in every container (`Runtime.createVolume`). */
export async function createVolume(s: RuntimeState, ctx: Context, build: Build): Promise<void> {
  planOf(s, ctx, build, 'createVolume').addWorkspace();
  return Promise.resolve();
}

/** The pod's host aliases, as the init log shows them (`Runtime.inspectNetwork`). */
export async function inspectNetwork(s: RuntimeState, ctx: Context, build: Build): Promise<string> {
  return Promise.resolve(describeSpec(planOf(s, ctx, build, 'inspectNetwork'), 'hostAliases'));
}

/** The pod's volumes, as the init log shows them (`Runtime.inspectVolume`). */
export async function inspectVolume(s: RuntimeState, ctx: Context, build: Build): Promise<string> {
  return Promise.resolve(describeSpec(planOf(s, ctx, build, 'inspectVolume'), 'volumes'));
}

/** Nothing to remove: the host aliases go with the pod (`Runtime.removeNetwork`). */
export async function removeNetwork(s: RuntimeState, ctx: Context, build: Build): Promise<void> {
  s.live(ctx, { operation: 'removeNetwork', subject: build.id });
  return Promise.resolve();
}

/** Nothing to remove: the workspace goes with the pod (`Runtime.removeVolume`). */
export async function removeVolume(s: RuntimeState, ctx: Context, build: Build): Promise<void> {
  s.live(ctx, { operation: 'removeVolume', subject: build.id });
  return Promise.resolve();
}

/** The build's pod plan, once the ctx is live and the build was set up. */
function planOf(s: RuntimeState, ctx: Context, build: Build, operation: string): PodPlan {
  const where = { operation, subject: build.id };
  s.live(ctx, where);
  return s.buildState(build, where).plan;
}

/** One field of the planned pod's spec, as `kubectl get pod -o=jsonpath` shows it, in YAML. */
function describeSpec(plan: PodPlan, field: 'hostAliases' | 'volumes'): string {
  const pod = plan.toPod();
  return `$ kubectl get pod ${pod.metadata?.name} -o=jsonpath='{.spec.${field}}'\n${toYaml(pod.spec?.[field] ?? [])}`;
}
