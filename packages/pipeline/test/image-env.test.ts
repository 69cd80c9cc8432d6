import { describe, expect, it } from 'vitest';
import { envsubst, parseImageReference, velaEnvironment } from '../src/index.ts';
import { toVelaString } from '../src/environment.ts';
import { normalizeImage } from '../src/image.ts';
import { velaLookup } from '../src/substitute.ts';

const SHA = `sha256:${'a'.repeat(64)}`;

describe('parseImageReference', () => {
  it.each([
    ['alpine', 'docker.io/library/alpine:latest', 'alpine:latest'],
    ['alpine:3.20', 'docker.io/library/alpine:3.20', 'alpine:3.20'],
    ['library/alpine', 'docker.io/library/alpine:latest', 'alpine:latest'],
    ['docker.io/alpine', 'docker.io/library/alpine:latest', 'alpine:latest'],
    ['index.docker.io/library/alpine:edge', 'docker.io/library/alpine:edge', 'alpine:edge'],
    ['target/vela-git-slim', 'docker.io/target/vela-git-slim:latest', 'target/vela-git-slim:latest'],
    ['localhost/foo', 'localhost/foo:latest', 'localhost/foo:latest'],
    ['localhost:5000/foo/bar:1', 'localhost:5000/foo/bar:1', 'localhost:5000/foo/bar:1'],
    ['ghcr.io/go-vela/worker:v0.26.0', 'ghcr.io/go-vela/worker:v0.26.0', 'ghcr.io/go-vela/worker:v0.26.0'],
    [`alpine@${SHA}`, `docker.io/library/alpine@${SHA}`, `alpine@${SHA}`],
    [`alpine:3@${SHA}`, `docker.io/library/alpine:3@${SHA}`, `alpine:3@${SHA}`],
    ['[::1]:5000/img', '[::1]:5000/img:latest', '[::1]:5000/img:latest'],
    ['a__b/c-d--e.f:t_1.2-3', 'docker.io/a__b/c-d--e.f:t_1.2-3', 'a__b/c-d--e.f:t_1.2-3'],
    ['berth/busybox:1.35', 'docker.io/berth/busybox:1.35', 'berth/busybox:1.35'],
  ])('%s', (ref, normalized, familiar) => {
    const result = parseImageReference(ref);
    if (!result.ok) throw new Error(result.error);
    expect(result.reference.normalized).toBe(normalized);
    expect(result.reference.familiar).toBe(familiar);
  });

  it.each([
    ['', 'at least one component'],
    ['Alpine', 'must be lowercase'],
    ['#init', 'invalid reference format'],
    ['alpine:', 'invalid reference format'],
    ['alpine:-tag', 'invalid reference format'],
    ['a//b', 'invalid reference format'],
    ['-leading', 'invalid reference format'],
    ['alpine@sha256:abc', 'invalid reference format'],
    [`alpine@sha256:${'A'.repeat(64)}`, 'invalid checksum digest format'],
    [`alpine@md5:${'a'.repeat(32)}`, 'unsupported digest algorithm'],
    ['a'.repeat(64), 'cannot specify 64-byte hexadecimal strings'],
    [SHA, 'repository name must be canonical'],
    [`x/${'a'.repeat(260)}`, 'must not be more than 255 characters'],
    ['alpine:3.20 ', 'invalid reference format'],
    [`alpine:${'t'.repeat(129)}`, 'invalid reference format'],
  ])('refuses %j', (ref, message) => {
    const result = parseImageReference(ref);
    expect(result.ok).toBe(false);
    expect(!result.ok && result.error).toContain(message);
  });

  it('normalizeImage returns invalid input unchanged', () => {
    expect(normalizeImage('busybox')).toBe('docker.io/library/busybox:latest');
    expect(normalizeImage('#init')).toBe('#init');
  });
});

describe('velaEnvironment', () => {
  it('has Vela defaults without metadata', () => {
    const env = velaEnvironment();
    expect(env).toMatchObject({
      VELA: 'true',
      CI: 'true',
      VELA_ADDR: 'TODO',
      VELA_NETRC_USERNAME: 'x-oauth-basic',
      VELA_WORKSPACE: '/vela/src',
      BUILD_WORKSPACE: '/vela/src',
      VELA_BUILD_CREATED: '0',
      VELA_REPO_ACTIVE: 'false',
      // S api/types/user.go Environment: ToString([]string) is JSON (api/types/string.go).
      VELA_USER_FAVORITES: '[]',
    });
    expect(env['VELA_BUILD_NUMBER']).toBeUndefined();
  });

  it('writes the user favorites as JSON, as Vela ToString does a []string', () => {
    expect(velaEnvironment({ user: { favorites: ['octo/app', 'octo/lib'] } })['VELA_USER_FAVORITES']).toBe('["octo/app","octo/lib"]');
  });

  it('describes a pull request build', () => {
    const env = velaEnvironment({
      build: {
        number: 12,
        event: 'pull_request',
        event_action: 'opened',
        ref: 'refs/pull/42/head',
        head_ref: 'feature',
        base_ref: 'main',
        fork: true,
        link: 'https://v/12',
      },
      repo: { org: 'octo', name: 'hello', full_name: 'octo/hello', allow_events: ['push', 'pull_request:opened'], topics: ['a', 'b'] },
      server: { address: 'https://vela-server', webAddress: 'https://vela', sourceHost: 'github.com', source: 'github' },
    });
    expect(env).toMatchObject({
      VELA_BUILD_NUMBER: '12',
      BUILD_LINK: 'https://v/12',
      VELA_PULL_REQUEST: '42',
      BUILD_PULL_REQUEST_NUMBER: '42',
      VELA_PULL_REQUEST_SOURCE: 'feature',
      VELA_PULL_REQUEST_TARGET: 'main',
      VELA_PULL_REQUEST_FORK: 'true',
      VELA_WORKSPACE: '/vela/src/github.com/octo/hello',
      VELA_HOST: 'https://vela-server',
      VELA_NETRC_MACHINE: 'github.com',
      VELA_REPO_ALLOW_EVENTS: 'push,pull_request:opened',
      VELA_REPO_TOPICS: 'a,b',
      VELA_REPO_CUSTOM_PROPS: '{}',
    });
  });

  it('describes tag and deployment builds', () => {
    expect(velaEnvironment({ build: { event: 'tag', ref: 'refs/tags/v1.2.3' } })['VELA_BUILD_TAG']).toBe('v1.2.3');
    const deploy = velaEnvironment({ build: { event: 'deployment', deploy: 'prod', deploy_number: 4, ref: 'refs/tags/v2', deploy_payload: { region: 'eu' } } });
    expect(deploy).toMatchObject({
      VELA_DEPLOYMENT: 'prod',
      BUILD_TARGET: 'prod',
      VELA_DEPLOYMENT_NUMBER: '4',
      BUILD_TAG: 'v2',
      DEPLOYMENT_PARAMETER_REGION: 'eu',
    });
  });
});

describe('toVelaString (Vela api.ToString)', () => {
  it.each([
    ['x', 'x'],
    [true, 'true'],
    [3, '3'],
    [0.25, '0.25'],
    [2500000.5, '2.5000005e+06'],
    [0.00001, '1e-05'],
    [['a', 'b', 1], 'a,b,1'],
    [{ b: 1, a: [1, 2] }, '{"a":[1,2],"b":1}'],
    [[{ x: 1 }], '[{"x":1}]'],
  ])('%j', (value, want) => {
    expect(toVelaString(value)).toBe(want);
  });
});

describe('envsubst with Vela lookup', () => {
  const lookup = velaLookup({ A: 'one', LOWER: 'mixed Case', MULTI: 'a\nb' });
  it.each([
    ['${A}', 'one'],
    ['x${A}y', 'xoney'],
    ['$A stays', '$A stays'],
    ['$${A}', '${A}'],
    ['$$', '$'],
    ['${MISSING}', '${MISSING}'],
    ['${MISSING:-default}', '${MISSING}'],
    ['${A:-default}', 'one'],
    ['${LOWER^^}', 'MIXED CASE'],
    ['${LOWER,,}', 'mixed case'],
    ['${#A}', '3'],
    ['${A:1:1}', 'n'],
    ['${MULTI}', '"a\\nb"'],
  ])('%s', (input, want) => {
    expect(envsubst(input, lookup)).toBe(want);
  });

  it('throws on unterminated or empty substitutions', () => {
    expect(() => envsubst('${A', lookup)).toThrow(/missing closing brace/);
    expect(() => envsubst('${}', lookup)).toThrow(/variable name/);
  });
});
