/**
 * Vela's `PipelinePodsTemplate` (go-vela.github.io/v1alpha1): defaults for every build pod, from a
 * YAML file or from a custom resource in the cluster.
 */
import { readFile } from 'node:fs/promises';
import type { V1Affinity, V1Capabilities, V1PodDNSConfig, V1Sysctl, V1Toleration } from '@kubernetes/client-node';
import { parse as parseYaml } from 'yaml';

/** The API group, version and kind of the custom resource. */
export const PODS_TEMPLATE_GROUP = 'go-vela.github.io';
export const PODS_TEMPLATE_VERSION = 'v1alpha1';
export const PODS_TEMPLATE_KIND = 'PipelinePodsTemplate';
/** The plural resource name, for the custom objects API. */
export const PODS_TEMPLATE_PLURAL = 'pipelinepodstemplates';

/** `spec.template` of a PipelinePodsTemplate: what Berth applies to every build pod. */
export interface PipelinePodTemplate {
  metadata: {
    /** Added to the pod's labels; Berth's own labels win on a clash. */
    labels: Record<string, string>;
    /** Added to the pod's annotations. */
    annotations: Record<string, string>;
  };
  spec: {
    nodeSelector?: Record<string, string>;
    affinity?: V1Affinity;
    tolerations?: V1Toleration[];
    dnsPolicy?: 'ClusterFirstWithHostNet' | 'ClusterFirst' | 'Default' | 'None';
    dnsConfig?: V1PodDNSConfig;
    /** Defaults for every container; only `securityContext.capabilities`, as in Vela. */
    container?: { securityContext?: { capabilities?: V1Capabilities } };
    /** Pod-level security context; `runAsNonRoot` and `sysctls`, as in Vela. */
    securityContext?: { runAsNonRoot?: boolean; sysctls?: V1Sysctl[] };
  };
}

/** A template that changes nothing. */
export function emptyPodTemplate(): PipelinePodTemplate {
  return { metadata: { labels: {}, annotations: {} }, spec: {} };
}

/** Thrown for a template that is not a valid PipelinePodsTemplate; the message names the field. */
export class PodsTemplateError extends Error {
  override readonly name = 'PodsTemplateError';
}

const DNS_POLICIES = ['ClusterFirstWithHostNet', 'ClusterFirst', 'Default', 'None'];
const SPEC_KEYS = ['nodeSelector', 'affinity', 'tolerations', 'dnsPolicy', 'dnsConfig', 'container', 'securityContext'];

/** Reads and validates a PipelinePodsTemplate YAML file. */
export async function loadPodsTemplateFile(file: string): Promise<PipelinePodTemplate> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    throw new PodsTemplateError(`cannot read pods template file ${file}: ${(error as Error).message}`, { cause: error });
  }
  return parsePodsTemplateYaml(text, file);
}

/** Parses and validates PipelinePodsTemplate YAML text. `source` names it in errors. */
export function parsePodsTemplateYaml(text: string, source = 'pods template'): PipelinePodTemplate {
  let document: unknown;
  try {
    document = parseYaml(text);
  } catch (error) {
    throw new PodsTemplateError(`${source} is not valid YAML: ${(error as Error).message}`, { cause: error });
  }
  return parsePodsTemplate(document, source);
}

/**
 * Validates a PipelinePodsTemplate object (a parsed file, or the custom resource as the API returns it)
 * and returns its `spec.template`, every map filled. Strict like Vela's `yaml.UnmarshalStrict`: an
 * unknown field under `spec.template` is an error, so a typo does not silently do nothing.
 */
export function parsePodsTemplate(document: unknown, source = 'pods template'): PipelinePodTemplate {
  if (document === null || document === undefined || document === '') return emptyPodTemplate();
  const root = object(document, source);
  if (root.apiVersion !== undefined && root.apiVersion !== `${PODS_TEMPLATE_GROUP}/${PODS_TEMPLATE_VERSION}`) {
    throw new PodsTemplateError(`${source}: apiVersion must be ${PODS_TEMPLATE_GROUP}/${PODS_TEMPLATE_VERSION}; got ${JSON.stringify(root.apiVersion)}`);
  }
  if (root.kind !== undefined && root.kind !== PODS_TEMPLATE_KIND) {
    throw new PodsTemplateError(`${source}: kind must be ${PODS_TEMPLATE_KIND}; got ${JSON.stringify(root.kind)}`);
  }
  if (root.spec === undefined || root.spec === null) return emptyPodTemplate();
  const spec = object(root.spec, `${source}: spec`);
  if (spec.template === undefined || spec.template === null) return emptyPodTemplate();
  const template = object(spec.template, `${source}: spec.template`);
  unknownKeys(template, ['metadata', 'spec'], `${source}: spec.template`);
  const result = emptyPodTemplate();

  if (template.metadata !== undefined && template.metadata !== null) {
    const metadata = object(template.metadata, `${source}: spec.template.metadata`);
    unknownKeys(metadata, ['labels', 'annotations'], `${source}: spec.template.metadata`);
    result.metadata.labels = stringMap(metadata.labels, `${source}: spec.template.metadata.labels`);
    result.metadata.annotations = stringMap(metadata.annotations, `${source}: spec.template.metadata.annotations`);
  }
  if (template.spec === undefined || template.spec === null) return result;
  const where = `${source}: spec.template.spec`;
  const podSpec = object(template.spec, where);
  unknownKeys(podSpec, SPEC_KEYS, where);
  if (podSpec.nodeSelector != null) result.spec.nodeSelector = stringMap(podSpec.nodeSelector, `${where}.nodeSelector`);
  if (podSpec.affinity != null) result.spec.affinity = object(podSpec.affinity, `${where}.affinity`);
  if (podSpec.tolerations != null) {
    result.spec.tolerations = array(podSpec.tolerations, `${where}.tolerations`).map((t, i) => {
      const toleration = object(t, `${where}.tolerations[${i}]`);
      unknownKeys(toleration, ['key', 'operator', 'value', 'effect', 'tolerationSeconds'], `${where}.tolerations[${i}]`);
      return toleration;
    });
  }
  if (podSpec.dnsPolicy != null) {
    if (typeof podSpec.dnsPolicy !== 'string' || !DNS_POLICIES.includes(podSpec.dnsPolicy)) {
      throw new PodsTemplateError(`${where}.dnsPolicy must be one of ${DNS_POLICIES.join(', ')}; got ${JSON.stringify(podSpec.dnsPolicy)}`);
    }
    result.spec.dnsPolicy = podSpec.dnsPolicy as NonNullable<PipelinePodTemplate['spec']['dnsPolicy']>;
  }
  if (podSpec.dnsConfig != null) {
    const dns = object(podSpec.dnsConfig, `${where}.dnsConfig`);
    unknownKeys(dns, ['nameservers', 'searches', 'options'], `${where}.dnsConfig`);
    if (dns.nameservers != null) stringArray(dns.nameservers, `${where}.dnsConfig.nameservers`);
    if (dns.searches != null) stringArray(dns.searches, `${where}.dnsConfig.searches`);
    if (dns.options != null) array(dns.options, `${where}.dnsConfig.options`).forEach((o, i) => object(o, `${where}.dnsConfig.options[${i}]`));
    result.spec.dnsConfig = dns;
  }
  if (podSpec.container != null) {
    const container = object(podSpec.container, `${where}.container`);
    unknownKeys(container, ['securityContext'], `${where}.container`);
    if (container.securityContext != null) {
      const sc = object(container.securityContext, `${where}.container.securityContext`);
      unknownKeys(sc, ['capabilities'], `${where}.container.securityContext`);
      if (sc.capabilities != null) {
        const caps = object(sc.capabilities, `${where}.container.securityContext.capabilities`);
        unknownKeys(caps, ['add', 'drop'], `${where}.container.securityContext.capabilities`);
        const capabilities: V1Capabilities = {};
        if (caps.add != null) capabilities.add = stringArray(caps.add, `${where}.container.securityContext.capabilities.add`);
        if (caps.drop != null) capabilities.drop = stringArray(caps.drop, `${where}.container.securityContext.capabilities.drop`);
        result.spec.container = { securityContext: { capabilities } };
      } else {
        result.spec.container = { securityContext: {} };
      }
    } else {
      result.spec.container = {};
    }
  }
  if (podSpec.securityContext != null) {
    const sc = object(podSpec.securityContext, `${where}.securityContext`);
    unknownKeys(sc, ['runAsNonRoot', 'sysctls'], `${where}.securityContext`);
    const securityContext: NonNullable<PipelinePodTemplate['spec']['securityContext']> = {};
    if (sc.runAsNonRoot != null) {
      if (typeof sc.runAsNonRoot !== 'boolean') throw new PodsTemplateError(`${where}.securityContext.runAsNonRoot must be a boolean`);
      securityContext.runAsNonRoot = sc.runAsNonRoot;
    }
    if (sc.sysctls != null) {
      securityContext.sysctls = array(sc.sysctls, `${where}.securityContext.sysctls`).map((s, i) => {
        const sysctl = object(s, `${where}.securityContext.sysctls[${i}]`);
        unknownKeys(sysctl, ['name', 'value'], `${where}.securityContext.sysctls[${i}]`);
        if (typeof sysctl.name !== 'string' || typeof sysctl.value !== 'string') {
          throw new PodsTemplateError(`${where}.securityContext.sysctls[${i}] needs string name and value`);
        }
        return { name: sysctl.name, value: sysctl.value };
      });
    }
    result.spec.securityContext = securityContext;
  }
  return result;
}

function object(value: unknown, where: string): Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new PodsTemplateError(`${where} must be a mapping; got ${Array.isArray(value) ? 'a list' : JSON.stringify(value)}`);
  }
  return value as Record<string, unknown>;
}

function array(value: unknown, where: string): unknown[] {
  if (!Array.isArray(value)) throw new PodsTemplateError(`${where} must be a list`);
  return value;
}

function stringArray(value: unknown, where: string): string[] {
  const list = array(value, where);
  list.forEach((item, i) => {
    if (typeof item !== 'string') throw new PodsTemplateError(`${where}[${i}] must be a string`);
  });
  return list as string[];
}

function stringMap(value: unknown, where: string): Record<string, string> {
  if (value === undefined || value === null) return {};
  const map = object(value, where);
  const out: Record<string, string> = {};
  for (const [key, item] of Object.entries(map)) {
    if (typeof item !== 'string') throw new PodsTemplateError(`${where}.${key} must be a string; got ${JSON.stringify(item)}`);
    out[key] = item;
  }
  return out;
}

function unknownKeys(value: Record<string, unknown>, known: readonly string[], where: string): void {
  const unknown = Object.keys(value).filter((key) => !known.includes(key));
  if (unknown.length > 0) {
    throw new PodsTemplateError(
      `${where}: unknown field${unknown.length > 1 ? 's' : ''} ${unknown.map((k) => JSON.stringify(k)).join(', ')} (known: ${known.join(', ')})`,
    );
  }
}
