// `berth start` configuration: every problem listed in one message, exit 2, nothing started.
import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import { runCli } from './run-cli.ts';

const BASE = { VELA_SERVER_ADDR: 'http://vela.example:8080', VELA_SERVER_SECRET: 'x', BERTH_LISTEN: '127.0.0.1:0' };

const CASES: Array<[string, Record<string, string>, string[], RegExp]> = [
  ['no server address', { VELA_SERVER_ADDR: '' }, [], /server\.addr \(default\): is required \(set VELA_SERVER_ADDR\)/],
  ['a build limit that is not a number', { VELA_BUILD_LIMIT: 'many' }, [], /build\.limit \(env VELA_BUILD_LIMIT\): must be a whole number, got "many"/],
  ['a build limit of 0', { VELA_BUILD_LIMIT: '0' }, [], /build\.limit \(env VELA_BUILD_LIMIT\): must be at least 1/],
  ['a check-in that is not a duration', { VELA_CHECK_IN: '5 minutes' }, [], /checkIn \(env VELA_CHECK_IN\): must be a Go duration/],
  ['a build timeout of 0', { VELA_BUILD_TIMEOUT: '0' }, [], /build\.timeout \(env VELA_BUILD_TIMEOUT\): must be longer than 0/],
  ['an unknown log format', { VELA_LOG_FORMAT: 'xml' }, [], /log\.format \(env VELA_LOG_FORMAT\): must be json or text/],
  ['an unknown log level', { VELA_LOG_LEVEL: 'loud' }, [], /log\.level \(env VELA_LOG_LEVEL\): must be one of/],
  ['a worker address without a scheme', { VELA_WORKER_ADDR: 'worker-1:8080' }, [], /worker\.addr \(env VELA_WORKER_ADDR\): must be a full URL with a scheme/],
  ['a worker address with a trailing slash', { VELA_WORKER_ADDR: 'http://worker-1:8080/' }, [], /worker\.addr .*trailing slash/],
  ['an https worker address without a certificate', { VELA_WORKER_ADDR: 'https://worker-1' }, [], /server\.cert .*required when worker\.addr is https/],
  ['a queue address that is not redis', { VELA_QUEUE_ADDR: 'http://redis:6379' }, [], /queue\.addr \(env VELA_QUEUE_ADDR\): must use redis or rediss/],
  ['a bad queue public key', { VELA_QUEUE_PUBLIC_KEY: 'c2hvcnQ=' }, [], /queue\.public-key .*32-byte Ed25519/],
  ['an unknown runtime', { VELA_RUNTIME_DRIVER: 'podman' }, [], /runtime\.driver \(env VELA_RUNTIME_DRIVER\): must be docker or kubernetes/],
  ['an unknown runtime by flag', {}, ['--runtime', 'lxc'], /runtime\.driver \(flag --runtime-driver\): must be docker or kubernetes/],
  [
    'both pods template name and file',
    { VELA_RUNTIME_PODS_TEMPLATE_NAME: 'a', VELA_RUNTIME_PODS_TEMPLATE_FILE: '/b.yml' },
    [],
    /either runtime\.pods-template-name or runtime\.pods-template-file/,
  ],
  [
    'a negative max log size',
    { VELA_EXECUTOR_MAX_LOG_SIZE: '-1' },
    [],
    /executor\.max_log_size \(env VELA_EXECUTOR_MAX_LOG_SIZE\): must be 0 or a positive whole number, got "-1"/,
  ],
  ['a bad capability', { VELA_RUNTIME_DROP_CAPABILITIES: 'net_raw' }, [], /capabilities look like CAP_NET_RAW/],
  ['a bad boolean', { VELA_EXECUTOR_ENFORCE_TRUSTED_REPOS: 'maybe' }, [], /must be true or false, got "maybe"/],
  ['a bad drain grace', { BERTH_DRAIN_GRACE: 'soon' }, [], /drain-grace \(env BERTH_DRAIN_GRACE\): must be a Go duration/],
  ['a bad stop grace flag', {}, ['--stop-grace', '10 seconds'], /stop-grace \(flag --stop-grace\): must be a Go duration/],
  ['a bad listen address', { BERTH_LISTEN: 'everywhere' }, [], /listen \(env BERTH_LISTEN\): must be host:port/],
  ['a listen port out of range', { BERTH_LISTEN: ':70000' }, [], /listen \(env BERTH_LISTEN\): must be host:port/],
  ['a server timeout too short', { BERTH_SERVER_TIMEOUT: '1ms' }, [], /server-timeout \(env BERTH_SERVER_TIMEOUT\): must be at least 100ms/],
  ['an unknown flag', {}, ['--no-such-flag'], /unknown option '--no-such-flag'/],
];

describe('berth start: bad configuration', () => {
  for (const [name, env, args, re] of CASES) {
    it(`${name}: exit 2 with a clear message`, async () => {
      const run = await runCli(['start', ...args], { env: { ...BASE, ...env } });
      expect(run.code).toBe(2);
      expect(run.stderr).toMatch(re);
      expect(run.stderr).not.toMatch(/\n\s+at /); // no stack trace
    });
  }

  it('lists every problem at once', async () => {
    const run = await runCli(['start', '--build-limit', 'x'], {
      env: { VELA_LOG_FORMAT: 'xml', VELA_RUNTIME_DRIVER: 'podman', BERTH_DRAIN_GRACE: 'soon', VELA_WORKER_ADDR: 'nope' },
    });
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/invalid configuration for berth start \(6 problems\)/);
    for (const re of [/build\.limit \(flag --build-limit\)/, /log\.format/, /runtime\.driver/, /drain-grace/, /worker\.addr/, /server\.addr/])
      expect(run.stderr).toMatch(re);
  });

  it('a kubeconfig that does not exist: exit 2 naming the runtime', async () => {
    const run = await runCli(['start', '--runtime', 'kubernetes'], { env: { ...BASE, VELA_RUNTIME_CONFIG: '/nonexistent/kubeconfig' } });
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/invalid kubernetes runtime configuration: .*kubeconfig/);
  });

  it('a runtime plugin that does not exist: exit 2 naming the path, before anything starts', async () => {
    const run = await runCli(['start', '--runtime-plugin', './no-such-plugin.js'], { env: BASE });
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/--runtime \.\/no-such-plugin\.js: no such file .*no-such-plugin\.js/);
  });

  it('a --runtime-option the built-in runtime does not take: exit 2 listing the options it takes', async () => {
    const run = await runCli(['start', '--runtime-option', 'colour=blue'], { env: BASE });
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/the docker runtime has no option "colour"; its options: socketPath/);
  });

  it('an API port in use: exit 2', async () => {
    const server = createServer();
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as { port: number }).port;
    try {
      const run = await runCli(['start'], { env: { ...BASE, BERTH_LISTEN: `127.0.0.1:${port}` } });
      expect(run.code).toBe(2);
      expect(run.stderr).toMatch(/cannot listen for the worker API: .*EADDRINUSE/);
    } finally {
      server.close();
    }
  });

  it('--help documents every option with its environment variable and default', async () => {
    const run = await runCli(['start', '--help']);
    expect(run.code).toBe(0);
    for (const s of [
      '--server-addr',
      'VELA_SERVER_ADDR',
      '--build-limit',
      'VELA_BUILD_LIMIT',
      'default 1',
      '--queue-routes',
      'default vela',
      '--drain-grace',
      'BERTH_DRAIN_GRACE',
      'default 10m',
      '--runtime-namespace',
      'VELA_RUNTIME_NAMESPACE',
      'POST /register',
    ]) {
      expect(run.stdout).toContain(s);
    }
  });
});
