/**
 * Docker image references, parsed and normalised as Docker (distribution/reference) and Vela's
 * `internal/image.ParseWithError` do.
 */

/** A parsed, normalised image reference. */
export interface ImageReference {
  /** Registry host (and port): `docker.io` for Docker Hub. */
  domain: string;
  /** Repository path within the registry: `library/alpine`. */
  path: string;
  /** Tag; `latest` when the reference had neither tag nor digest, '' when it had only a digest. */
  tag: string;
  /** Digest (`sha256:…`), or ''. */
  digest: string;
  /** `domain/path`: `docker.io/library/alpine`. */
  name: string;
  /** The full normalised reference: `docker.io/library/alpine:latest`. */
  normalized: string;
  /** The short form Docker prints: `alpine:latest`. */
  familiar: string;
}

/** The result of {@link parseImageReference}. */
export type ImageReferenceResult = { ok: true; reference: ImageReference } | { ok: false; error: string };

const alnum = '[a-z0-9]+';
const separator = '(?:[._]|__|[-]+)';
const pathComponent = `${alnum}(?:${separator}${alnum})*`;
const domainComponent = '(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])';
const domainName = `${domainComponent}(?:\\.${domainComponent})*`;
const ipv6 = '\\[(?:[a-fA-F0-9:]+)\\]';
const domain = `(?:${domainName}|${ipv6})(?::[0-9]+)?`;
const tag = '[\\w][\\w.-]{0,127}';
const digest = '[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}';
const namePattern = `(?:${domain}/)?${pathComponent}(?:/${pathComponent})*`;
const REFERENCE = new RegExp(`^(${namePattern})(?::(${tag}))?(?:@(${digest}))?$`);
const DOMAIN_AND_PATH = new RegExp(`^(?:(${domain})/)?(${pathComponent}(?:/${pathComponent})*)$`);
const HEX64 = /^[a-f0-9]{64}$/;
const NAME_MAX = 255;
const DIGEST_LENGTHS: Record<string, number> = { sha256: 64, sha384: 96, sha512: 128 };

function splitDockerDomain(name: string): { domain: string; remainder: string } {
  const i = name.indexOf('/');
  let dom: string;
  let remainder: string;
  const head = i < 0 ? '' : name.slice(0, i);
  if (i < 0 || (!/[.:]/.test(head) && head !== 'localhost' && head.toLowerCase() === head)) {
    dom = 'docker.io';
    remainder = name;
  } else {
    dom = head;
    remainder = name.slice(i + 1);
  }
  if (dom === 'index.docker.io') dom = 'docker.io';
  if (dom === 'docker.io' && !remainder.includes('/')) remainder = `library/${remainder}`;
  return { domain: dom, remainder };
}

function validateDigest(value: string): string | null {
  const i = value.indexOf(':');
  if (i <= 0 || i + 1 === value.length) return 'invalid checksum digest format';
  const algorithm = value.slice(0, i);
  const encoded = value.slice(i + 1);
  const length = DIGEST_LENGTHS[algorithm];
  if (length === undefined) return 'unsupported digest algorithm';
  if (encoded.length !== length) return 'invalid checksum digest length';
  if (!/^[a-f0-9]+$/.test(encoded)) return 'invalid checksum digest format';
  return null;
}

/**
 * Parses an image reference and normalises it as Docker does: `alpine` →
 * `docker.io/library/alpine:latest`, `localhost:5000/x` keeps its registry, `index.docker.io` becomes
 * `docker.io`, a reference with only a digest gets no tag.
 *
 * Returns Docker's error wording for invalid references (`invalid reference format`, uppercase
 * repository names, names over 255 characters, a bare 64-hex id, bad digests).
 * Gotcha: a bare digest or image id (`sha256:…`) is refused: a step needs a repository name.
 */
export function parseImageReference(ref: string): ImageReferenceResult {
  if (ref === '') return { ok: false, error: 'repository name must have at least one component' };
  if (HEX64.test(ref)) {
    return { ok: false, error: `invalid repository name (${ref}), cannot specify 64-byte hexadecimal strings` };
  }
  if (/^[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}$/.test(ref) && validateDigest(ref) === null) {
    return { ok: false, error: `repository name must be canonical: ${ref} is a digest, not an image name` };
  }
  const { domain: dom, remainder } = splitDockerDomain(ref);
  const tagSep = remainder.indexOf(':');
  const remoteName = tagSep > -1 ? remainder.slice(0, tagSep) : remainder;
  if (remoteName.toLowerCase() !== remoteName) {
    return { ok: false, error: `invalid reference format: repository name (${remoteName}) must be lowercase` };
  }
  const full = `${dom}/${remainder}`;
  const m = REFERENCE.exec(full);
  if (m === null) {
    if (REFERENCE.test(full.toLowerCase())) return { ok: false, error: 'invalid reference format: repository name must be lowercase' };
    return { ok: false, error: 'invalid reference format' };
  }
  const name = m[1] ?? '';
  if (name.length > NAME_MAX) return { ok: false, error: `repository name must not be more than ${NAME_MAX} characters` };
  const digestValue = m[3] ?? '';
  if (digestValue !== '') {
    const problem = validateDigest(digestValue);
    if (problem !== null) return { ok: false, error: problem };
  }
  const parts = DOMAIN_AND_PATH.exec(name);
  const path = parts?.[2] ?? name;
  let tagValue = m[2] ?? '';
  if (tagValue === '' && digestValue === '') tagValue = 'latest';
  const suffix = `${tagValue === '' ? '' : `:${tagValue}`}${digestValue === '' ? '' : `@${digestValue}`}`;
  let familiarName = name;
  if (dom === 'docker.io') {
    familiarName = path;
    if (familiarName.startsWith('library/') && !familiarName.slice('library/'.length).includes('/')) {
      familiarName = familiarName.slice('library/'.length);
    }
  }
  return {
    ok: true,
    reference: {
      domain: dom,
      path,
      tag: tagValue,
      digest: digestValue,
      name,
      normalized: `${name}${suffix}`,
      familiar: `${familiarName}${suffix}`,
    },
  };
}

/**
 * The normalised form of an image reference (`alpine` → `docker.io/library/alpine:latest`), or
 * the input unchanged when it is invalid (as Vela's `image.ParseWithError` returns it with an error).
 */
export function normalizeImage(ref: string): string {
  const result = parseImageReference(ref);
  return result.ok ? result.reference.normalized : ref;
}
