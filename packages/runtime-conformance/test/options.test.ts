import { describe, expect, it } from 'vitest';
import { CONFORMANCE_CAPABILITIES, conformanceCases, imageNameWithoutTag, resolveConformanceOptions, type ConformanceOptions } from '../src/index.ts';

describe('resolveConformanceOptions', () => {
  it('applies the documented defaults', () => {
    const previous = process.env.BERTH_BUSYBOX_IMAGE;
    delete process.env.BERTH_BUSYBOX_IMAGE;
    try {
      const resolved = resolveConformanceOptions();
      expect(resolved).toMatchObject({
        image: 'berth/busybox:1.35',
        missingImage: 'berth/conformance-missing:0',
        invalidImage: 'UPPER/Case::bad',
        workspacePath: '/vela',
        timeouts: { case: 60_000, cancel: 1_000, imageError: 15_000 },
        largeLogBytes: 50 * 1024 * 1024,
        skip: {},
      });
    } finally {
      if (previous !== undefined) process.env.BERTH_BUSYBOX_IMAGE = previous;
    }
  });

  it('takes the image from BERTH_BUSYBOX_IMAGE and the workspace from config', () => {
    const previous = process.env.BERTH_BUSYBOX_IMAGE;
    process.env.BERTH_BUSYBOX_IMAGE = 'local/busybox:test';
    try {
      const resolved = resolveConformanceOptions({ config: { workspacePath: '/work' } });
      expect(resolved.image).toBe('local/busybox:test');
      expect(resolved.workspacePath).toBe('/work');
    } finally {
      if (previous === undefined) delete process.env.BERTH_BUSYBOX_IMAGE;
      else process.env.BERTH_BUSYBOX_IMAGE = previous;
    }
  });

  it('takes the workspace path from its own option first, passes it to every runtime, and refuses a relative one', () => {
    const resolved = resolveConformanceOptions({ workspacePath: '/builds', config: { workspacePath: '/ignored', stopGraceMs: 5 } });
    expect(resolved.workspacePath).toBe('/builds');
    expect(resolved.config).toEqual({ workspacePath: '/builds', stopGraceMs: 5 });
    expect(() => resolveConformanceOptions({ workspacePath: 'builds' })).toThrow(/workspacePath must be absolute; got "builds"/);
  });

  it('rejects an unknown capability and a skip without a reason', () => {
    expect(() => resolveConformanceOptions({ skip: { teleport: 'no' } } as unknown as ConformanceOptions)).toThrow(/unknown capability "teleport"/);
    expect(() => resolveConformanceOptions({ skip: { privileged: ' ' } })).toThrow(/needs a reason/);
  });
});

describe('conformanceCases', () => {
  it('starts with the preflight, and only the privileged group reads /proc', () => {
    const cases = conformanceCases();
    expect(cases.slice(0, 2).map((c) => c.group)).toEqual(['preflight', 'preflight']);
    const procReaders = cases.filter((c) => c.capabilities?.includes('linuxProc')).map((c) => c.group);
    expect(procReaders).toEqual(['privileged', 'privileged', 'privileged']);
    expect(cases.filter((c) => c.capabilities?.includes('images')).map((c) => c.group)).toEqual(['images', 'images']);
  });

  it('has unique names, and every capability guards at least one case', () => {
    const cases = conformanceCases();
    expect(new Set(cases.map((c) => c.name)).size).toBe(cases.length);
    for (const capability of CONFORMANCE_CAPABILITIES)
      expect(
        cases.some((c) => c.capabilities?.includes(capability)),
        capability,
      ).toBe(true);
  });
});

describe('imageNameWithoutTag', () => {
  it.each([
    ['berth/busybox:1.35', 'berth/busybox'],
    ['alpine', 'alpine'],
    ['docker.io/library/alpine:3', 'alpine'],
    ['localhost:5000/team/tool:v1', 'localhost:5000/team/tool'],
    ['ghcr.io/acme/builder@sha256:' + 'a'.repeat(64), 'ghcr.io/acme/builder'],
  ])('%s → %s', (image, expected) => {
    expect(imageNameWithoutTag(image)).toBe(expected);
  });
});
