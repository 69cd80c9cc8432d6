/** Images (go-vela/worker runtime/docker/image.go): pull on demand, inspect for the init log. */
import type { Context } from '@berth/context';
import type { Container } from '@berth/pipeline';
import type { Dialer, RuntimeState } from './state.ts';

/** Pulls the container's image (`Runtime.createImage`). */
export async function createImage(s: RuntimeState, ctx: Context, container: Container): Promise<void> {
  const where = { operation: 'createImage', subject: container.id };
  const image = s.resolve(container, where);
  await s.pull(ctx, where, container, image, s.containers.get(container.id)?.buildId ?? '');
}

/** The image's id, size and date for the init log (`Runtime.inspectImage`). */
export async function inspectImage(s: RuntimeState, ctx: Context, container: Container): Promise<string> {
  const where = { operation: 'inspectImage', subject: container.id };
  const header = `$ docker image inspect ${container.image}\n`;
  if (container.pull === 'on_start') return `${header}skipped for container ${container.id} due to pull policy on_start\n`;
  const image = s.resolve(container, where);
  const info = await s.call(ctx, where, (signal) => imageInspect(s, image.reference, signal), { 404: 'ImageNotFound' });
  const created = info.Created ? ` created ${info.Created}` : '';
  return `${header}${info.Id} ${image.reference} ${formatBytes(info.Size)}${created}\n`;
}

function imageInspect(s: RuntimeState, reference: string, signal: AbortSignal): Promise<{ Id: string; Size: number; Created?: string }> {
  return new Promise((resolve, reject) => {
    (s.docker.modem as Dialer).dial(
      {
        path: `/images/${encodeURIComponent(reference)}/json`,
        method: 'GET',
        abortSignal: signal,
        statusCodes: { 200: true, 404: 'no such image', 500: 'server error' },
      },
      (error, data) => (error ? reject(error) : resolve(data as { Id: string; Size: number })),
    );
  });
}

function formatBytes(size: number | undefined): string {
  if (typeof size !== 'number') return '';
  if (size < 1024 * 1024) return `${(size / 1024).toFixed(1)} KiB`;
  return `${(size / (1024 * 1024)).toFixed(1)} MiB`;
}
