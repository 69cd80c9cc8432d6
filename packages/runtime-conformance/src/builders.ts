import { randomBytes } from 'node:crypto';
import { emptyBuild, emptyContainer, type Build, type Container, type PullPolicy } from '@berth/pipeline';

/** What {@link conformanceContainer} accepts: a few fields by name, the rest of {@link Container} as is. */
export interface ConformanceContainerFields extends Partial<Container> {
  /**
   * Shell lines run the way a compiled Vela step runs its commands: `entrypoint` becomes
   * `['/bin/sh', '-c']`, `commands` becomes `['echo $VELA_BUILD_SCRIPT | base64 -d | /bin/sh -e']`
   * and `VELA_BUILD_SCRIPT` holds the base64 of the script.
   *
   * Gotcha: unlike Vela's compiler it adds no `echo $ <command>` trace lines, so the logs hold only
   * what the lines print. Do not also set `entrypoint` or `commands`.
   */
  script?: string | readonly string[];
}

const SCRIPT_RUNNER = 'echo $VELA_BUILD_SCRIPT | base64 -d | /bin/sh -e';

/** The base64 `VELA_BUILD_SCRIPT` of a script made of `lines` (POSIX sh, `set -e`, no trace lines). */
export function encodeScript(lines: string | readonly string[]): string {
  const body = typeof lines === 'string' ? lines : lines.join('\n');
  return Buffer.from(`#!/bin/sh\nset -e\n${body}\n`, 'utf8').toString('base64');
}

/**
 * A compiled {@link Container} for conformance cases: every field at its zero value (as
 * `parseContainer` would fill it), then `fields`. `id` defaults to `step_<random>`, `name` to
 * `step`, `number` to 1, `pull` to `not_present`; `script` is expanded as Vela's compiler does.
 *
 * Gotcha: `image` has no default; the suite passes its `image` option.
 */
export function conformanceContainer(fields: ConformanceContainerFields = {}): Container {
  const { script, ...rest } = fields;
  const name = rest.name ?? 'step';
  const container = emptyContainer({
    id: `step_${uniqueSuffix()}_${name}`,
    name,
    number: 1,
    pull: 'not_present' satisfies PullPolicy,
    ...rest,
    environment: { ...rest.environment },
  });
  if (script !== undefined) {
    if (rest.entrypoint?.length || rest.commands?.length) {
      throw new TypeError('[berth] conformanceContainer: give either `script` or `entrypoint`/`commands`, not both');
    }
    container.entrypoint = ['/bin/sh', '-c'];
    container.commands = [SCRIPT_RUNNER];
    container.environment = { HOME: '/root', SHELL: '/bin/sh', ...container.environment, VELA_BUILD_SCRIPT: encodeScript(script) };
  }
  return container;
}

/**
 * A compiled {@link Build} for conformance cases: every field at its zero value, then `fields`.
 * `id` defaults to a fresh `berth_conformance_<random>`.
 *
 * Gotcha: containers are not renumbered or re-identified; give each a distinct `id` and `name`
 * (the helpers {@link conformanceStep} and {@link conformanceService} do).
 */
export function conformanceBuild(fields: Partial<Build> = {}): Build {
  return emptyBuild({ id: `berth_conformance_${uniqueSuffix()}`, ...fields });
}

/** A step of `build` named `name` at position `number`: id `step_<build id>_<name>`. */
export function conformanceStep(build: Pick<Build, 'id'>, name: string, number: number, fields: ConformanceContainerFields = {}): Container {
  return conformanceContainer({ id: `step_${build.id}_${name}`, name, number, ...fields });
}

/** A detached service of `build` named `name` (its host name): id `service_<build id>_<name>`. */
export function conformanceService(build: Pick<Build, 'id'>, name: string, number: number, fields: ConformanceContainerFields = {}): Container {
  return conformanceContainer({ id: `service_${build.id}_${name}`, name, number, detach: true, ...fields });
}

/** Eight lower-case hex characters: unique enough for ids of one test run, valid in every engine's names. */
export function uniqueSuffix(): string {
  return randomBytes(4).toString('hex');
}
