import { parseBuild, parseContainer } from '@berth/pipeline';
import { describe, expect, it } from 'vitest';
import { conformanceBuild, conformanceContainer, conformanceService, conformanceStep, encodeScript } from '../src/index.ts';

describe('conformance builders', () => {
  it('builds a container that parseContainer accepts unchanged, with every zero value filled', () => {
    const container = conformanceContainer({ image: 'berth/busybox:1.35', commands: ['echo', 'hi'] });
    const parsed = parseContainer(container, { strict: true });
    expect(parsed.ok).toBe(true);
    if (parsed.ok) expect(parsed.value).toEqual(container);
    expect(container).toMatchObject({ name: 'step', number: 1, pull: 'not_present', detach: false, privileged: false });
    expect(container.id).toMatch(/^step_[0-9a-f]{8}_step$/);
  });

  it('expands a script the way Vela compiles commands, without trace lines', () => {
    const container = conformanceContainer({ image: 'x', script: ['echo one', 'echo "two"'], environment: { A: '1' } });
    expect(container.entrypoint).toEqual(['/bin/sh', '-c']);
    expect(container.commands).toEqual(['echo $VELA_BUILD_SCRIPT | base64 -d | /bin/sh -e']);
    expect(container.environment.A).toBe('1');
    const script = Buffer.from(container.environment.VELA_BUILD_SCRIPT ?? '', 'base64').toString();
    expect(script).toBe('#!/bin/sh\nset -e\necho one\necho "two"\n');
    expect(encodeScript('exit 3')).toBe(Buffer.from('#!/bin/sh\nset -e\nexit 3\n').toString('base64'));
  });

  it('refuses a script together with an entrypoint or commands', () => {
    expect(() => conformanceContainer({ script: ['true'], commands: ['x'] })).toThrow(TypeError);
    expect(() => conformanceContainer({ script: ['true'], entrypoint: ['sh'] })).toThrow(/either `script`/);
  });

  it('builds a build that parseBuild accepts, with steps and detached services named after it', () => {
    const build = conformanceBuild();
    build.services = [conformanceService(build, 'db', 1, { image: 'x' })];
    build.steps = [conformanceStep(build, 'test', 1, { image: 'x' })];
    const parsed = parseBuild(build, { strict: true });
    expect(parsed.ok).toBe(true);
    expect(build.id).toMatch(/^berth_conformance_[0-9a-f]{8}$/);
    expect(build.services[0]).toMatchObject({ id: `service_${build.id}_db`, name: 'db', detach: true });
    expect(build.steps[0]).toMatchObject({ id: `step_${build.id}_test`, name: 'test', detach: false });
    expect(conformanceBuild().id).not.toBe(build.id);
  });
});
