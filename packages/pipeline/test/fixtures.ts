/** Shared helpers of the fixture tests: how each fixture is compiled and compared. */
import { readFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { compilePipeline, marshalBuild, velaEnvironment, type Build, type CompileOptions, type CompileResult, type EnvironmentInput } from '../src/index.ts';

export const FIXTURES = join(import.meta.dirname, 'fixtures');

/** The build metadata every fixture is compiled with. */
export const FIXTURE_METADATA: EnvironmentInput = {
  build: {
    number: 7,
    event: 'push',
    branch: 'main',
    ref: 'refs/heads/main',
    commit: 'abc123',
    author: 'octocat',
    link: 'https://vela.example.com/octo/hello/7',
  },
  repo: { org: 'octo', name: 'hello', full_name: 'octo/hello', branch: 'main', clone: 'https://github.com/octo/hello.git' },
  user: { name: 'octocat', active: true },
};

/** The secret values every fixture is compiled with (a sidecar may replace them). */
const FIXTURE_SECRETS: Record<string, string> = { docker_password: 'pw', api_token: 'tok', org_token: 'org-tok' };

/** Compiles fixture `dir/name.yml` with the default options and its `name.options.json` sidecar. */
export function compileFixture(dir: 'valid' | 'invalid', name: string): CompileResult {
  const base = join(FIXTURES, dir, name);
  const source = readFileSync(`${base}.yml`, 'utf8');
  const options: CompileOptions = { file: `${name}.yml`, metadata: FIXTURE_METADATA, secrets: FIXTURE_SECRETS };
  if (existsSync(`${base}.options.json`)) Object.assign(options, JSON.parse(readFileSync(`${base}.options.json`, 'utf8')) as Partial<CompileOptions>);
  return compilePipeline(source, options);
}

/**
 * A compiled build in the form the expected .json files hold: Vela's omitempty JSON, with the
 * default VELA_* environment left out of each container (it is the same everywhere and tested
 * on its own) unless a step changed one of those values.
 */
export function fixtureForm(build: Build): Record<string, unknown> {
  const defaults = velaEnvironment(FIXTURE_METADATA);
  const strip = (env: Record<string, string>): Record<string, string> => Object.fromEntries(Object.entries(env).filter(([k, v]) => defaults[k] !== v));
  const copy = structuredClone(build);
  for (const c of [...copy.steps, ...copy.services, ...copy.stages.flatMap((s) => s.steps), ...copy.secrets.flatMap((s) => (s.origin ? [s.origin] : []))]) {
    c.environment = strip(c.environment);
  }
  for (const s of copy.stages) s.environment = strip(s.environment);
  return marshalBuild(copy);
}
