import { filepathMatch, parseImageReference } from '@berth/pipeline';

/**
 * Whether `image` may run privileged under the operator's allowlist (Vela's
 * `VELA_RUNTIME_PRIVILEGED_IMAGES`), with Vela's semantics (`reference.FamiliarMatch`):
 * each pattern is a path glob matched against the image's familiar string
 * (`target/vela-docker:latest`, `alpine:3.20`) and then its familiar name (`target/vela-docker`).
 * So `target/vela-docker` allows every tag, `target/vela-docker:v1` only that tag, and
 * `target/*` every image of `target`. An unparsable image or pattern never matches.
 */
export function isPrivilegedImage(image: string, patterns: readonly string[] | undefined): boolean {
  if (!patterns || patterns.length === 0) return false;
  const parsed = parseImageReference(image);
  if (!parsed.ok) return false;
  const { familiar, domain, path } = parsed.reference;
  const familiarName = domain === 'docker.io' ? path.replace(/^library\//, '') : `${domain}/${path}`;
  return patterns.some((pattern) => {
    try {
      return filepathMatch(pattern, familiar) || filepathMatch(pattern, familiarName);
    } catch {
      return false; // a malformed pattern allows nothing
    }
  });
}
