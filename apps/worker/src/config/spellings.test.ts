// Every spelling go-vela/worker 8ae8b6f accepts: its flag names (cmd/vela-worker/flags.go,
// executor/flags.go, runtime/flags.go, go-vela/server queue/flags.go) in urfave/cli v3.8's syntax
// (command_parse.go: -name or --name, value after = or as the next argument), the log level and
// format spellings of cmd/vela-worker/run.go, the cli.File /vela fallbacks, Go's ParseBool,
// ParseInt(base 0) and ParseDuration, and the .env file of github.com/joho/godotenv/autoload.
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCli } from '../../test/run-cli.ts';
import { readStartConfig } from '../vela/config.ts';
import { createProgram } from '../main.ts';
import { parseDotenv } from './dotenv.ts';
import { normalizeArgs } from './options.ts';
import { ConfigError } from './resolve.ts';
import { type SettingName, SETTINGS, spellingsOf } from './table.ts';
import { parseGoInt } from './values.ts';
import { tempDir } from '../../test/temp-dir.ts';

const BASE = { VELA_SERVER_ADDR: 'http://vela.example:8080', VELA_SERVER_SECRET: 'x' };

/** go-vela/worker's flags: name, a value, and what Berth must read from it. */
const GO_FLAGS: Array<[string, string, SettingName, unknown]> = [
  ['worker.addr', 'http://w1:8080', 'workerAddr', 'http://w1:8080'],
  ['checkIn', '5m', 'checkIn', 300_000],
  ['build.limit', '3', 'buildLimit', 3],
  ['build.timeout', '1h', 'buildTimeout', 3_600_000],
  ['storage.file-size-limit', '10', 'storageFileSizeLimit', 10],
  ['storage.build-file-size-limit', '20', 'storageBuildFileSizeLimit', 20],
  ['log.format', 'Text', 'logFormat', 'text'],
  ['log.level', 'DEBUG', 'logLevel', 'debug'],
  ['server.addr', 'http://vela:8080', 'serverAddr', 'http://vela:8080'],
  ['server.secret', 's', 'serverSecret', 's'],
  ['server.tls-min-version', '1.3', 'serverTlsMinVersion', '1.3'],
  ['executor.driver', 'linux', 'executorDriver', 'linux'],
  ['executor.max_log_size', '0x100', 'executorMaxLogSize', 256],
  ['executor.log_streaming_timeout', '90s', 'logStreamingTimeout', 90_000],
  ['executor.enforce-trusted-repos', 'F', 'enforceTrustedRepos', false],
  ['executor.outputs-image', 'alpine', 'outputsImage', 'alpine'],
  ['queue.driver', 'redis', 'queueDriver', 'redis'],
  ['queue.addr', 'redis://r:6379', 'queueAddr', 'redis://r:6379'],
  ['queue.cluster', 'false', 'queueCluster', false],
  ['queue.routes', 'a,b', 'queueRoutes', ['a', 'b']],
  ['queue.pop.timeout', '15s', 'queuePopTimeout', 15_000],
  ['queue.private-key', Buffer.alloc(64, 3).toString('base64'), 'queuePrivateKey', Buffer.alloc(64, 3).toString('base64')],
  ['queue.public-key', Buffer.alloc(32, 1).toString('base64'), 'queuePublicKey', Buffer.alloc(32, 1).toString('base64')],
  ['runtime.driver', 'kubernetes', 'runtimeDriver', 'kubernetes'],
  ['runtime.config', '/etc/kube', 'runtimeConfig', '/etc/kube'],
  ['runtime.namespace', 'ci', 'runtimeNamespace', 'ci'],
  ['runtime.pods-template-file', '/p.yml', 'runtimePodsTemplateFile', '/p.yml'],
  ['runtime.privileged-images', 'docker:dind', 'runtimePrivilegedImages', ['docker:dind']],
  ['runtime.volumes', '/tmp:/tmp', 'runtimeVolumes', ['/tmp:/tmp']],
  ['runtime.drop-capabilities', 'CAP_NET_RAW', 'runtimeDropCapabilities', ['CAP_NET_RAW']],
];

/** Runs `berth start --check-config` and returns what it printed, by flag. */
async function checkConfig(
  args: string[],
  env: Record<string, string> = {},
  cwd?: string,
): Promise<{ code: number; stderr: string; lines: Map<string, string> }> {
  const run = await runCli(['start', ...args, '--check-config'], { env: { ...BASE, ...env }, ...(cwd ? { cwd } : {}) });
  const lines = new Map<string, string>();
  for (const line of run.stdout.split('\n')) {
    const m = /^([\w-]+): (.*?) {2}# (.*)$/.exec(line);
    if (m) lines.set(m[1]!, `${m[2]!} (${m[3]!})`);
  }
  return { code: run.code, stderr: run.stderr, lines };
}

describe('berth start accepts every flag spelling go-vela/worker accepts', () => {
  it('has a setting for every go-vela/worker flag', () => {
    const velaNames = Object.values(SETTINGS).flatMap((s) => ('vela' in s ? [s.vela] : []));
    expect(velaNames.sort()).toEqual([...GO_FLAGS.map(([f]) => f), 'server.cert', 'server.cert-key', 'runtime.pods-template-name'].sort());
  });

  // Each Go flag under each of its spellings (Vela's, kebab, camel), parsed as Go parses it.
  for (const [flag, value, name, want] of GO_FLAGS) {
    it(`${flag}=${value} under every spelling`, () => {
      for (const key of new Set([flag, ...spellingsOf(name)])) {
        const read = readStartConfig({ env: BASE, flags: { [key]: value }, defaultHostname: 'h' });
        expect(read.values[name], `${key}=${value}`).toEqual(want);
      }
    });
  }

  // The whole command line go-vela/worker would take, in both of urfave/cli's syntaxes.
  it.each([
    ['--name value', (f: string, v: string) => [`--${f}`, v]],
    ['-name=value', (f: string, v: string) => [`-${f}=${v}`]],
  ])('every Go flag as %s on the command line', async (_syntax, spell) => {
    const args = GO_FLAGS.flatMap(([f, v]) => spell(f, v));
    const { code, stderr, lines } = await checkConfig(args);
    expect(stderr).toBe('');
    expect(code).toBe(0);
    for (const [flag, , name] of GO_FLAGS) {
      expect(lines.get(SETTINGS[name].flag), flag).toMatch(new RegExp(` \\(flag --${SETTINGS[name].flag}\\)$`));
    }
  });

  it('parses -name=value, --name value and bools without a value on the command line', async () => {
    const { code, stderr, lines } = await checkConfig([
      '-build.limit=2',
      '--checkIn',
      '5m',
      '-log.level',
      'd',
      '--queue.cluster=false',
      '--executor.enforce-trusted-repos',
      '-queue.routes=a,b',
      '--queue.routes',
      'c',
    ]);
    expect(stderr).toBe('');
    expect(code).toBe(0);
    expect(lines.get('build-limit')).toBe('2 (flag --build-limit)');
    expect(lines.get('check-in')).toBe('5m0s (flag --check-in)');
    expect(lines.get('log-level')).toBe('"debug" (flag --log-level)');
    expect(lines.get('queue-cluster')).toBe('false (flag --queue-cluster)');
    expect(lines.get('executor-enforce-trusted-repos')).toBe('true (flag --executor-enforce-trusted-repos)');
    expect(lines.get('queue-routes')).toBe('["a","b","c"] (flag --queue-routes)');
  });

  it('leaves values that look like flag names alone', async () => {
    const { code, lines } = await checkConfig(['--runtime-namespace', 'checkin', '--queue-routes', '-build.limit']);
    expect(code).toBe(0);
    expect(lines.get('runtime-namespace')).toBe('"checkin" (flag --runtime-namespace)');
    expect(lines.get('queue-routes')).toBe('["-build.limit"] (flag --queue-routes)');
  });
});

describe('log level and format as cmd/vela-worker/run.go spells them', () => {
  const levels: Array<[string[], string]> = [
    [['t', 'trace', 'Trace', 'TRACE'], 'trace'],
    [['d', 'debug', 'Debug', 'DEBUG'], 'debug'],
    [['w', 'warn', 'Warn', 'WARN'], 'warn'],
    [['e', 'error', 'Error', 'ERROR'], 'error'],
    [['f', 'fatal', 'Fatal', 'FATAL'], 'fatal'],
    [['p', 'panic', 'Panic', 'PANIC'], 'panic'],
    [['i', 'info', 'Info', 'INFO'], 'info'],
  ];
  it.each(levels)('%j = %s', (spellings, level) => {
    for (const s of spellings) expect(readStartConfig({ env: { ...BASE, VELA_LOG_LEVEL: s } }).config.log.level).toBe(level);
  });
  it.each([
    [['t', 'text', 'Text', 'TEXT'], 'text'],
    [['j', 'json', 'Json', 'JSON'], 'json'],
  ])('%j = %s', (spellings, format) => {
    for (const s of spellings) expect(readStartConfig({ env: { ...BASE, VELA_LOG_FORMAT: s } }).config.log.format).toBe(format);
  });
});

describe("Go's value syntax", () => {
  it('booleans as strconv.ParseBool', () => {
    for (const [s, b] of [
      ['1', true],
      ['t', true],
      ['T', true],
      ['TRUE', true],
      ['True', true],
      ['0', false],
      ['f', false],
      ['F', false],
      ['FALSE', false],
      ['False', false],
    ] as const) {
      expect(readStartConfig({ env: { ...BASE, VELA_EXECUTOR_ENFORCE_TRUSTED_REPOS: s } }).config.executor.enforceTrustedRepos).toBe(b);
    }
  });
  it('integers as strconv.ParseInt(s, 0, 64)', () => {
    expect(['10', '+10', '0x1F', '0X1f', '0o17', '017', '0b101', '1_000', '0x_1F'].map(parseGoInt)).toEqual([10, 10, 31, 31, 15, 15, 5, 1000, 31]);
    expect(['', '1.5', '_1', '1_', '1__0', '0o', '08', 'ten', '1e3'].map(parseGoInt)).toEqual(Array(9).fill(undefined));
  });
});

describe('the /vela file fallbacks (cli.File)', () => {
  const files: Record<string, string> = {
    '/vela/executor/max_log_size': '2048\n',
    '/vela/executor/enforce_trusted_repos': 'false',
    '/vela/queue/addr': 'redis://queue:6379',
    '/vela/queue/routes': 'large,gpu',
    '/vela/queue/pop_timeout': '30s\n',
    '/vela/signing.pub': Buffer.alloc(32, 2).toString('base64'),
    '/vela/signing.key': `${Buffer.alloc(64, 2).toString('base64')}\n`,
    '/vela/runtime/driver': 'kubernetes',
    '/vela/runtime/namespace': 'builds\n',
    '/vela/runtime/privileged_images': 'target/vela-docker',
    '/vela/runtime/volumes': '/cache:/cache:rw',
  };
  const readFile = (p: string): string | undefined => files[p];

  it('reads each, trimming the newline an editor leaves', () => {
    const { config } = readStartConfig({ env: BASE, readFile });
    expect(config.executor.maxLogSize).toBe(2048);
    expect(config.executor.enforceTrustedRepos).toBe(false);
    expect(config.queue).toMatchObject({ addr: 'redis://queue:6379', routes: ['large', 'gpu'], popTimeoutMs: 30_000, publicKey: files['/vela/signing.pub'] });
    expect(config.runtime).toMatchObject({
      driver: 'kubernetes',
      namespace: 'builds',
      privilegedImages: ['target/vela-docker'],
      volumes: ['/cache:/cache:rw'],
    });
  });

  it('come after flags and variables', () => {
    const { config } = readStartConfig({ env: { ...BASE, VELA_RUNTIME_NAMESPACE: 'from-env' }, flags: { 'queue.addr': 'redis://flag:6379' }, readFile });
    expect([config.runtime.namespace, config.queue.addr]).toEqual(['from-env', 'redis://flag:6379']);
  });

  // S queue/flags.go queue.private-key: VELA_QUEUE_PRIVATE_KEY, QUEUE_PRIVATE_KEY, then
  // cli.File("/vela/signing.key"); S queue/redis/opts.go WithPrivateKey refuses what is not base64.
  it('read /vela/signing.key for queue.private-key, and check it as go-vela/server queue/redis does', () => {
    expect(() => readStartConfig({ env: BASE, readFile })).not.toThrow();
    const bad = (p: string): string | undefined => (p === '/vela/signing.key' ? 'not base64!\n' : undefined);
    expect(() => readStartConfig({ env: BASE, readFile: bad })).toThrow(
      /queue\.private-key \(file \/vela\/signing\.key\): must be a base64 \(standard, padded\) queue signing private key/,
    );
    // A variable comes first: the file is not read.
    expect(() => readStartConfig({ env: { ...BASE, VELA_QUEUE_PRIVATE_KEY: Buffer.alloc(64, 1).toString('base64') }, readFile: bad })).not.toThrow();
  });

  it('name the file in a problem', () => {
    expect(() => readStartConfig({ env: BASE, readFile: (p) => (p === '/vela/queue/pop_timeout' ? '30' : undefined) })).toThrow(
      /queue\.pop\.timeout \(file \/vela\/queue\/pop_timeout\): must be a Go duration with a unit/,
    );
  });

  it('an unreadable file is a problem, not a crash', () => {
    let err: unknown;
    try {
      readStartConfig({
        env: BASE,
        readFile: (p) => {
          if (p === '/vela/runtime/config') throw Object.assign(new Error('denied'), { code: 'EACCES' });
          return undefined;
        },
      });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).toMatch(/runtime\.config \(file \/vela\/runtime\/config\): cannot read it: EACCES/);
  });
});

describe('.env (godotenv autoload)', () => {
  it('parses as godotenv v1.5.1 does', () => {
    const text = [
      '# a comment',
      'export VELA_BUILD_LIMIT=2',
      'VELA_LOG_LEVEL: debug',
      "VELA_QUEUE_ROUTES='a,b' ",
      'VELA_RUNTIME_NAMESPACE=ci # trailing comment',
      'NAME=x#not-a-comment',
      'GREETING="hi\\n${NAME}"',
      "SINGLE='${NAME}'",
      'UNQUOTED=$NAME-y',
      'EMPTY=',
    ].join('\r\n');
    expect(parseDotenv(text)).toEqual({
      VELA_BUILD_LIMIT: '2',
      VELA_LOG_LEVEL: 'debug',
      VELA_QUEUE_ROUTES: 'a,b',
      VELA_RUNTIME_NAMESPACE: 'ci',
      NAME: 'x#not-a-comment',
      GREETING: 'hi\nx#not-a-comment',
      SINGLE: '${NAME}',
      UNQUOTED: 'x#not-a-comment-y',
      EMPTY: '',
    });
    expect(() => parseDotenv('A="unterminated')).toThrow(/unterminated quoted value/);
    expect(() => parseDotenv('BAD-NAME=1')).toThrow(/unexpected character "-"/);
  });

  it('berth start loads .env from its working directory; the environment wins', async () => {
    const dir = tempDir('berth-dotenv-');
    writeFileSync(path.join(dir, '.env'), 'VELA_BUILD_LIMIT=4\nVELA_LOG_FORMAT=t\nVELA_CHECK_IN=2m\n');
    const { code, lines } = await checkConfig([], { VELA_CHECK_IN: '3m' }, dir);
    expect(code).toBe(0);
    expect(lines.get('build-limit')).toBe(`4 (env VELA_BUILD_LIMIT from ${path.join(dir, '.env')})`);
    expect(lines.get('log-format')).toBe(`"text" (env VELA_LOG_FORMAT from ${path.join(dir, '.env')})`);
    expect(lines.get('check-in')).toBe('3m0s (env VELA_CHECK_IN)');
  });

  it('a broken .env stops berth start, naming the file', async () => {
    const dir = tempDir('berth-dotenv-');
    writeFileSync(path.join(dir, '.env'), 'VELA_BUILD_LIMIT="4\n');
    const run = await runCli(['start'], { env: BASE, cwd: dir });
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/\.env: unterminated quoted value/);
  });
});

const program = await createProgram({ stdout: process.stdout, stderr: process.stderr, env: {}, cwd: process.cwd(), exitCode: 0 });
describe('normalizeArgs', () => {
  const exec = program.commands.find((c) => c.name() === 'exec')!;
  it('rewrites Go spellings to the flags berth declares, and leaves values, short flags and what follows -- alone', () => {
    expect(
      normalizeArgs(exec, 'exec', ['-build.timeout=5m', '--kubeconfig', '/k', '-e', '--namespace=x', '-eA=1', '-r', 'docker', 'file.yml', '--', '--timeout']),
    ).toEqual(['--build-timeout=5m', '--runtime-config', '/k', '-e', '--namespace=x', '-eA=1', '-r', 'docker', 'file.yml', '--', '--timeout']);
  });
});
