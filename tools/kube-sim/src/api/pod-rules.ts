// What the API server does to a pod on create and update: defaults, validation (422 Invalid
// with causes) and the rule that only a few spec fields may change.

import { badRequest, invalid, type StatusCause } from '../status.ts';
import { clone, type ContainerSpec, type KubeObject, type Pod } from '../types.ts';

const subdomain = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const label = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const labelValue = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

/** RFC 1123 subdomain check, with the API server's wording. */
function subdomainError(value: string): string | undefined {
  if (value.length <= 253 && subdomain.test(value)) return undefined;
  return `Invalid value: "${value}": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`;
}

/** RFC 1123 label check, with the API server's wording. */
export function labelError(value: string): string | undefined {
  if (value.length <= 63 && label.test(value)) return undefined;
  return `Invalid value: "${value}": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`;
}

/** Validates metadata common to every object: name or generateName, labels. */
export function validateMeta(obj: KubeObject, causes: StatusCause[], nameCheck: (v: string) => string | undefined = subdomainError): void {
  const meta = obj.metadata;
  if (!meta.name && !meta.generateName) {
    causes.push({ reason: 'FieldValueRequired', message: 'Required value: name or generateName is required', field: 'metadata.name' });
  } else if (meta.name) {
    const e = nameCheck(meta.name);
    if (e) causes.push({ reason: 'FieldValueInvalid', message: e, field: 'metadata.name' });
  }
  for (const [k, v] of Object.entries(meta.labels ?? {})) {
    if (typeof v !== 'string' || v.length > 63 || !labelValue.test(v)) {
      causes.push({
        reason: 'FieldValueInvalid',
        message: `Invalid value: "${String(v)}": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character`,
        field: `metadata.labels`,
      });
    }
    if (k === '') causes.push({ reason: 'FieldValueInvalid', message: 'Invalid value: "": name part must be non-empty', field: 'metadata.labels' });
  }
}

/** The pull policy the API server defaults: Always for `:latest` or untagged images, else IfNotPresent. */
function defaultPullPolicy(image: string): string {
  if (image.includes('@')) return 'IfNotPresent';
  const lastSegment = image.slice(image.lastIndexOf('/') + 1);
  const colon = lastSegment.lastIndexOf(':');
  if (colon < 0) return 'Always';
  return lastSegment.slice(colon + 1) === 'latest' ? 'Always' : 'IfNotPresent';
}

function defaultContainer(c: ContainerSpec): void {
  if (c.image && !c.imagePullPolicy) c.imagePullPolicy = defaultPullPolicy(c.image);
  c.terminationMessagePath ??= '/dev/termination-log';
  c.terminationMessagePolicy ??= 'File';
  c.resources ??= {};
}

function qosClass(pod: Pod): string {
  const all = [...pod.spec.containers, ...(pod.spec.initContainers ?? [])];
  const any = all.some((c) => Object.keys(c.resources?.limits ?? {}).length > 0 || Object.keys(c.resources?.requests ?? {}).length > 0);
  if (!any) return 'BestEffort';
  const guaranteed = all.every((c) => c.resources?.limits?.cpu !== undefined && c.resources.limits.memory !== undefined);
  return guaranteed ? 'Guaranteed' : 'Burstable';
}

function validateContainers(list: unknown, field: string, causes: StatusCause[], volumes: Set<string>, required: boolean): void {
  if (list === undefined || list === null) {
    if (required) causes.push({ reason: 'FieldValueRequired', message: 'Required value', field });
    return;
  }
  if (!Array.isArray(list)) {
    causes.push({ reason: 'FieldValueInvalid', message: 'Invalid value: must be a list', field });
    return;
  }
  if (required && list.length === 0) causes.push({ reason: 'FieldValueRequired', message: 'Required value', field });
  const names = new Set<string>();
  (list as ContainerSpec[]).forEach((c, i) => {
    const f = `${field}[${i}]`;
    if (!c || typeof c !== 'object') {
      causes.push({ reason: 'FieldValueInvalid', message: 'Invalid value: must be an object', field: f });
      return;
    }
    if (!c.name) causes.push({ reason: 'FieldValueRequired', message: 'Required value', field: `${f}.name` });
    else {
      const e = labelError(c.name);
      if (e) causes.push({ reason: 'FieldValueInvalid', message: e, field: `${f}.name` });
      if (names.has(c.name)) causes.push({ reason: 'FieldValueDuplicate', message: `Duplicate value: "${c.name}"`, field: `${f}.name` });
      names.add(c.name);
    }
    if (!c.image || typeof c.image !== 'string' || c.image.trim() === '')
      causes.push({ reason: 'FieldValueRequired', message: 'Required value', field: `${f}.image` });
    if (c.imagePullPolicy && !['Always', 'IfNotPresent', 'Never'].includes(c.imagePullPolicy)) {
      causes.push({
        reason: 'FieldValueNotSupported',
        message: `Unsupported value: "${c.imagePullPolicy}": supported values: "Always", "IfNotPresent", "Never"`,
        field: `${f}.imagePullPolicy`,
      });
    }
    (c.volumeMounts ?? []).forEach((m, j) => {
      if (!volumes.has(m.name)) causes.push({ reason: 'FieldValueNotFound', message: `Not found: "${m.name}"`, field: `${f}.volumeMounts[${j}].name` });
      if (!m.mountPath) causes.push({ reason: 'FieldValueRequired', message: 'Required value', field: `${f}.volumeMounts[${j}].mountPath` });
    });
    (c.env ?? []).forEach((e, j) => {
      if (!e.name) causes.push({ reason: 'FieldValueRequired', message: 'Required value', field: `${f}.env[${j}].name` });
    });
  });
}

/** Defaults and validates a pod on create. Throws 400/422 ApiErrors. */
export function preparePodCreate(input: KubeObject, namespace: string): Pod {
  const pod = clone(input) as Pod;
  if (pod.metadata.namespace && pod.metadata.namespace !== namespace) {
    throw badRequest('the namespace of the provided object does not match the namespace sent on the request');
  }
  pod.metadata.namespace = namespace;
  pod.apiVersion = 'v1';
  pod.kind = 'Pod';
  const causes: StatusCause[] = [];
  validateMeta(pod, causes);
  if (!pod.spec || typeof pod.spec !== 'object') {
    causes.push({ reason: 'FieldValueRequired', message: 'Required value', field: 'spec.containers' });
    throw invalid('Pod', pod.metadata.name ?? pod.metadata.generateName ?? '', causes);
  }
  const spec = pod.spec;
  const volumes = new Set<string>();
  (spec.volumes ?? []).forEach((v, i) => {
    if (!v.name) causes.push({ reason: 'FieldValueRequired', message: 'Required value', field: `spec.volumes[${i}].name` });
    else if (volumes.has(v.name)) causes.push({ reason: 'FieldValueDuplicate', message: `Duplicate value: "${v.name}"`, field: `spec.volumes[${i}].name` });
    volumes.add(v.name);
  });
  validateContainers(spec.containers, 'spec.containers', causes, volumes, true);
  validateContainers(spec.initContainers, 'spec.initContainers', causes, volumes, false);
  if (spec.restartPolicy !== undefined && !['Always', 'OnFailure', 'Never'].includes(spec.restartPolicy)) {
    causes.push({
      reason: 'FieldValueNotSupported',
      message: `Unsupported value: "${spec.restartPolicy}": supported values: "Always", "OnFailure", "Never"`,
      field: 'spec.restartPolicy',
    });
  }
  if (spec.activeDeadlineSeconds !== undefined && !(Number.isInteger(spec.activeDeadlineSeconds) && spec.activeDeadlineSeconds > 0)) {
    causes.push({
      reason: 'FieldValueInvalid',
      message: `Invalid value: ${String(spec.activeDeadlineSeconds)}: must be between 1 and 2147483647, inclusive`,
      field: 'spec.activeDeadlineSeconds',
    });
  }
  (spec.hostAliases ?? []).forEach((h, i) => {
    if (!/^\d{1,3}(\.\d{1,3}){3}$/.test(h.ip ?? '') && !/^[0-9a-fA-F:]+$/.test(h.ip ?? '')) {
      causes.push({ reason: 'FieldValueInvalid', message: `Invalid value: "${h.ip}": must be a valid IP address`, field: `spec.hostAliases[${i}].ip` });
    }
  });
  if (causes.length > 0) throw invalid('Pod', pod.metadata.name ?? pod.metadata.generateName ?? '', causes);

  spec.restartPolicy ??= 'Always';
  spec.terminationGracePeriodSeconds ??= 30;
  spec.dnsPolicy ??= 'ClusterFirst';
  spec.securityContext ??= {};
  spec.schedulerName ??= 'default-scheduler';
  spec.enableServiceLinks ??= true;
  spec.priority ??= 0;
  spec.preemptionPolicy ??= 'PreemptLowerPriority';
  spec.serviceAccountName ??= 'default';
  spec.serviceAccount ??= spec.serviceAccountName;
  for (const c of spec.containers) defaultContainer(c);
  for (const c of spec.initContainers ?? []) defaultContainer(c);
  for (const v of spec.volumes ?? []) {
    if (v.emptyDir) v.emptyDir = { ...v.emptyDir };
  }
  pod.status = { phase: 'Pending', qosClass: qosClass(pod) };
  return pod;
}

function mutableSpecView(pod: Pod): unknown {
  const spec = clone(pod.spec) as Record<string, unknown> & Pod['spec'];
  for (const c of spec.containers ?? []) delete c.image;
  for (const c of spec.initContainers ?? []) delete c.image;
  delete spec.activeDeadlineSeconds;
  delete spec.tolerations;
  delete spec.terminationGracePeriodSeconds;
  return spec;
}

/**
 * Validates an update of a pod's spec and metadata (update or patch of the main resource):
 * only container images, activeDeadlineSeconds (set or lowered), tolerations and
 * terminationGracePeriodSeconds may change. Status is kept from the stored pod.
 */
export function preparePodUpdate(old: Pod, next: Pod): Pod {
  const pod = clone(next);
  pod.apiVersion = 'v1';
  pod.kind = 'Pod';
  pod.status = clone(old.status ?? { phase: 'Pending' });
  const causes: StatusCause[] = [];
  validateMeta(pod, causes);
  if (pod.metadata.name !== old.metadata.name)
    causes.push({ reason: 'FieldValueInvalid', message: 'Invalid value: field is immutable', field: 'metadata.name' });
  if (!pod.spec || typeof pod.spec !== 'object') causes.push({ reason: 'FieldValueRequired', message: 'Required value', field: 'spec' });
  else {
    for (const c of pod.spec.containers ?? []) {
      if (!c.image) causes.push({ reason: 'FieldValueRequired', message: 'Required value', field: `spec.containers[${pod.spec.containers.indexOf(c)}].image` });
      else if (!c.imagePullPolicy) c.imagePullPolicy = old.spec.containers.find((o) => o.name === c.name)?.imagePullPolicy ?? defaultPullPolicy(c.image);
    }
    const ads = pod.spec.activeDeadlineSeconds;
    const oldAds = old.spec.activeDeadlineSeconds;
    if (ads !== undefined && !(Number.isInteger(ads) && ads > 0)) {
      causes.push({
        reason: 'FieldValueInvalid',
        message: `Invalid value: ${String(ads)}: must be between 1 and 2147483647, inclusive`,
        field: 'spec.activeDeadlineSeconds',
      });
    } else if (oldAds !== undefined && (ads === undefined || ads > oldAds)) {
      causes.push({
        reason: 'FieldValueInvalid',
        message: `Invalid value: ${ads === undefined ? 'null' : ads}: must be less than or equal to previous value`,
        field: 'spec.activeDeadlineSeconds',
      });
    }
    if (causes.length === 0 && JSON.stringify(mutableSpecView(pod)) !== JSON.stringify(mutableSpecView(old))) {
      causes.push({
        reason: 'FieldValueForbidden',
        message:
          'Forbidden: pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)',
        field: 'spec',
      });
    }
  }
  if (causes.length > 0) throw invalid('Pod', old.metadata.name ?? '', causes);
  return pod;
}

/** A status update (pods/status): only status (and labels/annotations) are taken from `next`. */
export function preparePodStatusUpdate(old: Pod, next: Pod): Pod {
  const pod = clone(old);
  pod.status = clone(next.status ?? old.status ?? { phase: 'Pending' });
  if (next.metadata?.labels) pod.metadata.labels = clone(next.metadata.labels);
  if (next.metadata?.annotations) pod.metadata.annotations = clone(next.metadata.annotations);
  return pod;
}
