// The compiled-pipeline schemas cost start-up time and memory (zod builds every object with
// dozens of methods): they are built on the first parse, not when the package loads.
import type * as Zod from 'zod';
import { describe, expect, it, vi } from 'vitest';

const built = vi.hoisted(() => ({ objects: 0 }));
vi.mock('zod', async (importOriginal) => {
  const actual = await importOriginal<typeof Zod>();
  const looseObject: typeof actual.z.looseObject = (shape, params) => {
    built.objects++;
    return actual.z.looseObject(shape, params);
  };
  return { ...actual, z: { ...actual.z, looseObject } };
});

describe('the compiled-pipeline schemas', () => {
  it('are built on the first parse, once, not when @berth/pipeline loads', async () => {
    const { emptyBuild, parseBuild, parseContainer } = await import('../src/index.ts');
    expect(built.objects).toBe(0);
    expect(parseBuild(emptyBuild()).ok).toBe(true);
    const once = built.objects;
    expect(once).toBeGreaterThan(0);
    expect(parseContainer({ name: 'x' }).ok).toBe(true);
    expect(built.objects).toBe(once);
  });
});
