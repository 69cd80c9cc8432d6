import { describe, expect, it } from 'vitest';
import { ConfigError, loadStartConfig, parseGoDuration } from './config.ts';

const KEY = Buffer.alloc(32, 7).toString('base64');
const base = { VELA_SERVER_ADDR: 'https://vela.example.com', VELA_SERVER_SECRET: 's3cret' };
const load = (env: Record<string, string>, flags: Record<string, unknown> = {}) => loadStartConfig({ env, flags, defaultHostname: 'node-1' });

describe('parseGoDuration', () => {
  it.each([
    ['30m', 1_800_000],
    ['15s', 15_000],
    ['1h30m', 5_400_000],
    ['1.5h', 5_400_000],
    ['500ms', 500],
    ['0', 0],
    ['2h45m10.5s', 9_910_500],
  ])('%s = %d ms', (text, ms) => expect(parseGoDuration(text)).toBe(ms));
  it.each(['', '30', 'm', '1d', '1 h', 'abc'])('rejects %j', (text) => expect(parseGoDuration(text)).toBeUndefined());
});

describe('loadStartConfig', () => {
  it('applies Vela defaults', () => {
    const c = load(base);
    expect(c.worker).toEqual({ addr: 'http://node-1', hostname: 'node-1', port: 80, checkInMs: 900_000 });
    expect(c.build).toEqual({ limit: 1, timeoutMs: 1_800_000 });
    expect(c.queue).toMatchObject({ driver: 'redis', addr: undefined, routes: ['vela'], popTimeoutMs: 60_000 });
    expect(c.runtime).toMatchObject({ driver: 'docker', privilegedImages: [], volumes: [] });
    expect(c.executor).toMatchObject({ maxLogSize: 0, logStreamingTimeoutMs: 300_000, enforceTrustedRepos: true });
    expect(c.log).toEqual({ format: 'json', level: 'info' });
    expect(c.server.secret).toBe('s3cret');
  });

  const good: Array<[string, Record<string, string>, (c: ReturnType<typeof load>) => unknown, unknown]> = [
    ['worker address and port', { VELA_WORKER_ADDR: 'http://w7:8080' }, (c) => [c.worker.hostname, c.worker.port], ['w7', 8080]],
    ['WORKER_ADDR wins over VELA_WORKER_ADDR', { WORKER_ADDR: 'http://a:1', VELA_WORKER_ADDR: 'http://b:2' }, (c) => c.worker.hostname, 'a'],
    [
      'durations',
      { VELA_BUILD_TIMEOUT: '1h', VELA_CHECK_IN: '5m', VELA_QUEUE_POP_TIMEOUT: '15s', VELA_LOG_STREAMING_TIMEOUT: '90s' },
      (c) => [c.build.timeoutMs, c.worker.checkInMs, c.queue.popTimeoutMs, c.executor.logStreamingTimeoutMs],
      [3_600_000, 300_000, 15_000, 90_000],
    ],
    ['limits', { VELA_BUILD_LIMIT: '4', VELA_EXECUTOR_MAX_LOG_SIZE: '2097152' }, (c) => [c.build.limit, c.executor.maxLogSize], [4, 2_097_152]],
    ['routes as a comma list', { VELA_QUEUE_ROUTES: 'large, gpu:linux' }, (c) => c.queue.routes, ['large', 'gpu:linux']],
    ['routes NONE leaves them to the server', { VELA_QUEUE_ROUTES: 'NONE' }, (c) => c.queue.routes, []],
    [
      'queue address and key',
      { VELA_QUEUE_ADDR: 'redis://:pw@redis:6379/1', VELA_QUEUE_PUBLIC_KEY: KEY },
      (c) => [c.queue.addr, c.queue.publicKey],
      ['redis://:pw@redis:6379/1', KEY],
    ],
    [
      'kubernetes runtime',
      {
        VELA_RUNTIME_DRIVER: 'kubernetes',
        VELA_RUNTIME_CONFIG: '/etc/kube/config',
        VELA_RUNTIME_NAMESPACE: 'ci',
        VELA_RUNTIME_PODS_TEMPLATE_FILE: '/etc/berth/pods.yml',
        VELA_RUNTIME_PRIVILEGED_IMAGES: 'target/vela-docker,docker:dind',
        VELA_RUNTIME_VOLUMES: '/tmp:/tmp:ro',
        VELA_RUNTIME_DROP_CAPABILITIES: 'CAP_NET_RAW,CAP_SYS_ADMIN',
      },
      (c) => c.runtime,
      {
        driver: 'kubernetes',
        config: '/etc/kube/config',
        namespace: 'ci',
        podsTemplateName: undefined,
        podsTemplateFile: '/etc/berth/pods.yml',
        privilegedImages: ['target/vela-docker', 'docker:dind'],
        volumes: ['/tmp:/tmp:ro'],
        dropCapabilities: ['CAP_NET_RAW', 'CAP_SYS_ADMIN'],
      },
    ],
    ['log settings', { VELA_LOG_LEVEL: 'debug', VELA_LOG_FORMAT: 'text' }, (c) => c.log, { level: 'debug', format: 'text' }],
    ['Go booleans', { VELA_EXECUTOR_ENFORCE_TRUSTED_REPOS: 'F' }, (c) => c.executor.enforceTrustedRepos, false],
    ['https worker with certs', { VELA_WORKER_ADDR: 'https://w1', VELA_SERVER_CERT: '/c.pem', VELA_SERVER_CERT_KEY: '/k.pem' }, (c) => c.worker.port, 443],
  ];
  it.each(good)('reads %s', (_name, env, pick, want) => {
    expect(pick(load({ ...base, ...env }))).toEqual(want);
  });

  it('lets flags win over the environment, under Vela, kebab or camel names', () => {
    const c = load(
      { ...base, VELA_BUILD_LIMIT: '2' },
      { 'build.limit': 5, 'queue-routes': ['a', 'b'], runtimeDriver: 'kubernetes', 'server.addr': 'http://other' },
    );
    expect([c.build.limit, c.queue.routes, c.runtime.driver, c.server.addr]).toEqual([5, ['a', 'b'], 'kubernetes', 'http://other']);
  });

  const bad: Array<[string, Record<string, string>, RegExp[]]> = [
    ['no server address', { VELA_SERVER_ADDR: '' }, [/server\.addr \(default\): is required/]],
    ['a server address without scheme', { VELA_SERVER_ADDR: 'vela.example.com' }, [/server\.addr \(env VELA_SERVER_ADDR\): must be a full URL/]],
    ['a trailing slash', { VELA_SERVER_ADDR: 'https://vela/' }, [/trailing slash/]],
    ['a bad build limit', { VELA_BUILD_LIMIT: 'four' }, [/build\.limit \(env VELA_BUILD_LIMIT\): must be a whole number, got "four"/]],
    ['a zero build limit', { VELA_BUILD_LIMIT: '0' }, [/build\.limit .*at least 1/]],
    ['a duration without unit', { VELA_BUILD_TIMEOUT: '30' }, [/build\.timeout \(env VELA_BUILD_TIMEOUT\): must be a Go duration/]],
    ['an unknown runtime', { VELA_RUNTIME_DRIVER: 'podman' }, [/runtime\.driver .*docker or kubernetes/]],
    ['a non-redis queue address', { VELA_QUEUE_ADDR: 'http://redis:6379' }, [/queue\.addr .*redis or rediss/]],
    ['a short public key', { VELA_QUEUE_PUBLIC_KEY: 'abcd' }, [/queue\.public-key .*32-byte/]],
    ['https without certificates', { VELA_WORKER_ADDR: 'https://w1' }, [/certificate and its key/]],
    ['a bad capability', { VELA_RUNTIME_DROP_CAPABILITIES: 'NET_RAW' }, [/CAP_NET_RAW/]],
    ['a bad log level', { VELA_LOG_LEVEL: 'loud' }, [/log\.level/]],
    ['a bad boolean', { VELA_QUEUE_CLUSTER: 'yes' }, [/queue\.cluster .*true or false/]],
    ['both pod templates', { VELA_RUNTIME_PODS_TEMPLATE_NAME: 'a', VELA_RUNTIME_PODS_TEMPLATE_FILE: 'b' }, [/either/]],
    [
      'many problems at once',
      { VELA_SERVER_ADDR: '', VELA_BUILD_LIMIT: 'x', VELA_CHECK_IN: 'soon', VELA_RUNTIME_DRIVER: 'lxc', VELA_QUEUE_DRIVER: 'kafka' },
      [/5 problems/, /server\.addr/, /build\.limit/, /checkIn/, /runtime\.driver/, /queue\.driver/],
    ],
  ];
  it.each(bad)('refuses %s, naming the setting and its source', (_name, env, patterns) => {
    let err: unknown;
    try {
      load({ ...base, ...env });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    for (const p of patterns) expect((err as Error).message).toMatch(p);
  });
});
