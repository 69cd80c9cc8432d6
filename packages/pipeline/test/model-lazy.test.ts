// The compiled-pipeline schemas cost start-up time and memory (zod builds every object with
// dozens of methods): they are built on the first parse, not when the package loads, and the strict
// twin only for a strict parse (a worker never asks for one).
import type * as Zod from 'zod';
import { describe, expect, it, vi } from 'vitest';

const built = vi.hoisted(() => ({ objects: 0, strictObjects: 0 }));
vi.mock('zod', async (importOriginal) => {
  const actual = await importOriginal<typeof Zod>();
  const looseObject: typeof actual.z.looseObject = (shape, params) => {
    built.objects++;
    return actual.z.looseObject(shape, params);
  };
  const strictObject: typeof actual.z.strictObject = (shape, params) => {
    built.strictObjects++;
    return actual.z.strictObject(shape, params);
  };
  return { ...actual, z: { ...actual.z, looseObject, strictObject } };
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
    expect(built.strictObjects).toBe(0);

    expect(parseBuild(emptyBuild(), { strict: true }).ok).toBe(true);
    expect(parseContainer({ name: 'x', extra: 1 }, { strict: true }).unknownFields).toEqual(['extra']);
    expect(built.strictObjects).toBe(once);
    expect(built.objects).toBe(once);
  });
});
