// Image references and the kubelet's image decisions. kube-sim never pulls: a missing image
// fails as a pull from an unreachable registry would.

import type Docker from 'dockerode';

const component = '[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*';
const domain = '(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)(?:\\.(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?))*(?::[0-9]+)?';
const reference = new RegExp(
  `^(?:${domain}/)?${component}(?:/${component})*(?::[\\w][\\w.-]{0,127})?(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?$`,
);

/** True when `image` is a valid Docker image reference (what the kubelet's parser accepts). */
export function isValidReference(image: string): boolean {
  if (image.length === 0 || image.length > 255 + 128) return false;
  if (!reference.test(image)) return false;
  // The first component may be a domain only if followed by a path; upper case is only allowed there.
  const firstSlash = image.indexOf('/');
  const name = firstSlash >= 0 && /[.:]|^localhost$/.test(image.slice(0, firstSlash)) ? image.slice(firstSlash + 1) : image;
  return !/[A-Z]/.test(name.split(/[:@]/)[0] ?? '');
}

/** The message the kubelet gives an invalid reference. */
export function invalidReferenceMessage(image: string): string {
  return `Failed to apply default image tag "${image}": couldn't parse image reference "${image}": invalid reference format`;
}

/** The reference as a registry would see it (`busybox` → `docker.io/library/busybox:latest`). */
export function fullyQualified(image: string): string {
  let name = image;
  const firstSlash = name.indexOf('/');
  const hasDomain = firstSlash >= 0 && /[.:]|^localhost$/.test(name.slice(0, firstSlash));
  if (!hasDomain) name = `docker.io/${firstSlash < 0 ? 'library/' : ''}${name}`;
  const last = name.slice(name.lastIndexOf('/') + 1);
  if (!last.includes(':') && !last.includes('@')) name += ':latest';
  return name;
}

/** An image record of the node (the Docker engine's, seen the way containerd's CRI plugin lists it). */
export interface LocalImage {
  /** Image id, `sha256:…`. */
  id: string;
  size: number;
  /** Tags, fully qualified (`docker.io/berth/busybox:1.35`), in the engine's order. */
  repoTags: string[];
  /** Digest references, fully qualified (`docker.io/library/alpine@sha256:…`). */
  repoDigests: string[];
}

function repository(ref: string): string {
  const at = ref.indexOf('@');
  const name = at >= 0 ? ref.slice(0, at) : ref;
  const slash = name.lastIndexOf('/');
  const colon = name.lastIndexOf(':');
  return colon > slash ? name.slice(0, colon) : name;
}

async function inspect(docker: Docker, ref: string): Promise<Docker.ImageInspectInfo | undefined> {
  try {
    return await docker.getImage(ref).inspect();
  } catch (err) {
    if ((err as { statusCode?: number }).statusCode === 404) return undefined;
    throw err;
  }
}

/**
 * The node's record of `image`, or undefined when the engine does not have it.
 * A digest-pinned reference (`repo@sha256:<hex>`) resolves to the local image whose id is that
 * digest and which carries a tag of the same repository: kube-sim has no registry, so the image
 * id stands in for the manifest digest. The pinned reference is then one of the record's digests.
 */
export async function inspectLocalImage(docker: Docker, image: string): Promise<LocalImage | undefined> {
  let info = await inspect(docker, image);
  const pinned = /^(.+)@(sha256:[0-9a-f]{64})$/.exec(image);
  if (!info && pinned) {
    const byId = await inspect(docker, pinned[2] ?? '');
    const repo = repository(fullyQualified(pinned[1] ?? ''));
    if (byId?.RepoTags?.some((t) => repository(fullyQualified(t)) === repo)) info = byId;
  }
  if (!info) return undefined;
  const repoDigests = (info.RepoDigests ?? []).map(fullyQualified);
  if (pinned && !repoDigests.includes(fullyQualified(image))) repoDigests.push(fullyQualified(image));
  return { id: info.Id, size: info.Size, repoTags: (info.RepoTags ?? []).map(fullyQualified), repoDigests };
}

/**
 * `image` and `imageID` of a container status as containerd's CRI plugin reports them: the image
 * record's first tag (else the image id, which is what the kubelet put in the container config),
 * and its first repo digest (else the image id). So a digest-pinned `alpine@sha256:…` shows
 * as `docker.io/library/alpine:3.19`, and only `imageID` carries the digest.
 * Follows containerd internal/cri/server/container_status.go ContainerStatus (repoTags[0],
 * repoDigests[0] from util.ParseImageReferences) and kubernetes/kubernetes
 * pkg/kubelet/kuberuntime/kuberuntime_container.go startContainer (the config's image is the
 * image ref EnsureImageExists returned, i.e. the image id).
 */
export function containerdImageStatus(local: LocalImage): { image: string; imageID: string } {
  return { image: local.repoTags[0] ?? local.id, imageID: local.repoDigests[0] ?? local.id };
}
