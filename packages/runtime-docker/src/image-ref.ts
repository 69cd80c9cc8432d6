import { parseImageReference } from '@berth/pipeline';

/** An image reference normalised as Docker does, split the way the engine's pull endpoint wants it. */
export interface ResolvedImage {
  /** The normalised reference: `alpine` → `docker.io/library/alpine:latest`. */
  reference: string;
  /** `fromImage` of a pull: `docker.io/library/alpine`. */
  repository: string;
  /** `tag` of a pull: the digest when there is one, else the tag. */
  tagOrDigest: string;
}

/** Normalises `image` with `@berth/pipeline`'s `parseImageReference`; throws an Error with Docker's wording when it is invalid. */
export function resolveImage(image: string): ResolvedImage {
  const parsed = parseImageReference(image);
  if (!parsed.ok) throw new Error(parsed.error);
  const { normalized, name, tag, digest } = parsed.reference;
  return { reference: normalized, repository: name, tagOrDigest: digest || tag };
}
