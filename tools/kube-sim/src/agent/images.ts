// Image references and the kubelet's image decisions. kube-sim never pulls: a missing image
// fails as a pull from an unreachable registry would.

import type Docker from 'dockerode';

const component = '[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*';
const domain = '(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)(?:\\.(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?))*(?::[0-9]+)?';
const reference = new RegExp(`^(?:${domain}/)?${component}(?:/${component})*(?::[\\w][\\w.-]{0,127})?(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?$`);

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

/** The local image's id and size, or undefined when the engine does not have it. */
export async function inspectLocalImage(docker: Docker, image: string): Promise<{ id: string; size: number } | undefined> {
  try {
    const info = await docker.getImage(image).inspect();
    return { id: info.Id, size: info.Size };
  } catch (err) {
    if ((err as { statusCode?: number }).statusCode === 404) return undefined;
    throw err;
  }
}
