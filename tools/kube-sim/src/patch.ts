// The three patch formats the API server accepts for built-in types: JSON patch (RFC 6902),
// JSON merge patch (RFC 7386) and strategic merge patch (lists merged by their merge key,
// with the `$patch` directives). Server-side apply is not implemented (415).

import { ApiError, badRequest, unsupportedMediaType } from './status.ts';

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type JsonObject = { [key: string]: Json };

/** Content types kube-sim accepts on PATCH. */
const patchContentTypes = ['application/json-patch+json', 'application/merge-patch+json', 'application/strategic-merge-patch+json'] as const;

/** Merge keys of the pod (and pod status) lists that strategic merge patch merges by key, by field name. */
const mergeKeys: Record<string, string> = {
  containers: 'name',
  initContainers: 'name',
  ephemeralContainers: 'name',
  volumes: 'name',
  volumeMounts: 'mountPath',
  volumeDevices: 'devicePath',
  env: 'name',
  ports: 'containerPort',
  imagePullSecrets: 'name',
  hostAliases: 'ip',
  conditions: 'type',
  containerStatuses: 'name',
  initContainerStatuses: 'name',
  ephemeralContainerStatuses: 'name',
  ownerReferences: 'uid',
  topologySpreadConstraints: 'topologyKey',
  resourceClaims: 'name',
  podIPs: 'ip',
  hostIPs: 'ip',
};

function isObject(v: unknown): v is JsonObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** RFC 7386 JSON merge patch. */
export function jsonMergePatch(target: unknown, patch: unknown): unknown {
  if (!isObject(patch)) return structuredClone(patch);
  const result: JsonObject = isObject(target) ? structuredClone(target) : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete result[k];
    else result[k] = jsonMergePatch(result[k], v) as Json;
  }
  return result;
}

function strategicList(field: string, original: Json[] | undefined, patch: Json[]): Json[] {
  const mergeKey = mergeKeys[field];
  if (!mergeKey || !patch.every(isObject) || !(original ?? []).every(isObject)) {
    return patch.filter((item) => !(isObject(item) && item.$patch !== undefined)).map((i) => stripDirectives(i));
  }
  if (patch.some((item) => isObject(item) && item.$patch === 'replace')) {
    return patch.filter((item) => !(isObject(item) && item.$patch === 'replace')).map((i) => stripDirectives(i));
  }
  const result = (original ?? []).map((i) => structuredClone(i)) as JsonObject[];
  for (const item of patch) {
    const keyValue = item[mergeKey];
    const index = result.findIndex((r) => r[mergeKey] === keyValue);
    if (item.$patch === 'delete') {
      if (index >= 0) result.splice(index, 1);
      continue;
    }
    if (index >= 0) result[index] = strategicMerge(result[index], item, field) as JsonObject;
    else result.push(stripDirectives(item) as JsonObject);
  }
  return result;
}

function stripDirectives(value: Json): Json {
  if (Array.isArray(value)) return value.map((v) => stripDirectives(v));
  if (!isObject(value)) return value;
  const out: JsonObject = {};
  for (const [k, v] of Object.entries(value)) {
    if (k.startsWith('$')) continue;
    if (v === null) continue;
    out[k] = stripDirectives(v);
  }
  return out;
}

/**
 * Strategic merge patch for pods: maps merge recursively, `null` deletes a key, lists with a
 * known merge key (containers by name, env by name, volumeMounts by mountPath, ...) merge item
 * by item, other lists are replaced. Supports `$patch: replace|delete` and
 * `$deleteFromPrimitiveList/<field>`; `$setElementOrder/<field>` and `$retainKeys` are accepted
 * and ignored.
 */
export function strategicMerge(original: unknown, patch: unknown, _field = ''): unknown {
  if (!isObject(patch)) return structuredClone(patch);
  if (patch.$patch === 'replace') return stripDirectives(patch);
  if (patch.$patch === 'delete') return undefined;
  const result: JsonObject = isObject(original) ? structuredClone(original) : {};
  for (const [k, v] of Object.entries(patch)) {
    if (k === '$patch' || k === '$retainKeys' || k.startsWith('$setElementOrder/')) continue;
    if (k.startsWith('$deleteFromPrimitiveList/')) {
      const field = k.slice('$deleteFromPrimitiveList/'.length);
      const list = result[field];
      if (Array.isArray(list) && Array.isArray(v)) result[field] = list.filter((x) => !v.includes(x));
      continue;
    }
    if (v === null) {
      delete result[k];
    } else if (Array.isArray(v)) {
      const current = result[k];
      result[k] = strategicList(k, Array.isArray(current) ? current : undefined, v);
    } else if (isObject(v)) {
      const merged = strategicMerge(result[k], v, k);
      if (merged === undefined) delete result[k];
      else result[k] = merged as Json;
    } else {
      result[k] = v;
    }
  }
  return result;
}

function decodePointer(pointer: string): string[] {
  if (pointer === '') return [];
  if (!pointer.startsWith('/')) throw badRequest(`invalid JSON pointer "${pointer}"`);
  return pointer
    .slice(1)
    .split('/')
    .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
}

function patchFailure(message: string): ApiError {
  return new ApiError({ kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason: 'Invalid', code: 422 });
}

interface Operation {
  op: string;
  path: string;
  from?: string;
  value?: Json;
}

function locate(doc: Json, tokens: string[]): { parent: Json; last: string } {
  let cur = doc;
  for (const t of tokens.slice(0, -1)) {
    if (Array.isArray(cur)) cur = cur[Number(t)] as Json;
    else if (isObject(cur)) cur = cur[t] as Json;
    else cur = undefined as unknown as Json;
    if (cur === undefined) throw patchFailure(`the server rejected our request due to an error in our request: path ${tokens.join('/')} not found`);
  }
  return { parent: cur, last: tokens[tokens.length - 1] ?? '' };
}

function getAt(doc: Json, pointer: string): Json {
  let cur: Json | undefined = doc;
  for (const t of decodePointer(pointer)) {
    if (Array.isArray(cur)) cur = cur[Number(t)];
    else if (isObject(cur)) cur = cur[t];
    else cur = undefined;
    if (cur === undefined) throw patchFailure(`the server rejected our request due to an error in our request: path ${pointer} not found`);
  }
  return cur;
}

function removeAt(doc: Json, pointer: string): Json {
  const { parent, last } = locate(doc, decodePointer(pointer));
  if (Array.isArray(parent)) {
    const i = Number(last);
    if (!(i >= 0 && i < parent.length))
      throw patchFailure(`the server rejected our request due to an error in our request: remove ${pointer}: index out of range`);
    return parent.splice(i, 1)[0] as Json;
  }
  if (isObject(parent) && Object.hasOwn(parent, last)) {
    const v = parent[last] as Json;
    delete parent[last];
    return v;
  }
  throw patchFailure(`the server rejected our request due to an error in our request: remove ${pointer}: path not found`);
}

function addAt(doc: Json, pointer: string, value: Json, replace: boolean): Json {
  const tokens = decodePointer(pointer);
  if (tokens.length === 0) return value;
  const { parent, last } = locate(doc, tokens);
  if (Array.isArray(parent)) {
    const i = last === '-' ? parent.length : Number(last);
    if (!(i >= 0 && i <= parent.length) || (replace && i >= parent.length)) {
      throw patchFailure(`the server rejected our request due to an error in our request: ${pointer}: index out of range`);
    }
    if (replace) parent[i] = value;
    else parent.splice(i, 0, value);
  } else if (isObject(parent)) {
    if (replace && !Object.hasOwn(parent, last)) {
      throw patchFailure(`the server rejected our request due to an error in our request: replace operation does not apply: doc is missing key: ${pointer}`);
    }
    parent[last] = value;
  } else {
    throw patchFailure(`the server rejected our request due to an error in our request: ${pointer}: parent is not a container`);
  }
  return doc;
}

/** RFC 6902 JSON patch: add, remove, replace, move, copy, test. */
export function jsonPatch(target: unknown, operations: unknown): unknown {
  if (!Array.isArray(operations)) throw badRequest('json: cannot unmarshal object into Go value of type jsonpatch.Patch');
  let doc = structuredClone(target) as Json;
  for (const raw of operations as Operation[]) {
    if (!isObject(raw) || typeof raw.path !== 'string') throw badRequest('invalid JSON patch operation');
    switch (raw.op) {
      case 'add':
        doc = addAt(doc, raw.path, structuredClone(raw.value ?? null), false);
        break;
      case 'replace':
        doc = addAt(doc, raw.path, structuredClone(raw.value ?? null), true);
        break;
      case 'remove':
        removeAt(doc, raw.path);
        break;
      case 'move': {
        const v = removeAt(doc, raw.from ?? '');
        doc = addAt(doc, raw.path, v, false);
        break;
      }
      case 'copy':
        doc = addAt(doc, raw.path, structuredClone(getAt(doc, raw.from ?? '')), false);
        break;
      case 'test':
        if (JSON.stringify(getAt(doc, raw.path)) !== JSON.stringify(raw.value)) {
          throw patchFailure(`the server rejected our request due to an error in our request: testing value ${raw.path} failed`);
        }
        break;
      default:
        throw badRequest(`Unexpected kind: ${String(raw.op)}`);
    }
  }
  return doc;
}

/** Applies a patch body according to its content type; 415 for anything else. */
export function applyPatch(contentType: string, target: unknown, patch: unknown): unknown {
  const type = contentType.split(';')[0]?.trim().toLowerCase() ?? '';
  switch (type) {
    case 'application/json-patch+json':
      return jsonPatch(target, patch);
    case 'application/merge-patch+json':
      return jsonMergePatch(target, patch);
    case 'application/strategic-merge-patch+json':
      return strategicMerge(target, patch);
    default:
      throw unsupportedMediaType(type || '(none)', [...patchContentTypes]);
  }
}
