/**
 * A consumer project outside the workspace, as a plugin author would make one: the packed
 * tarballs installed with plain `npm`, a small runtime plugin that lives only there, and the
 * conformance suite run against it.
 */
import { execFile } from 'node:child_process';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import type { PackedPackage } from './pack.ts';

const run = promisify(execFile);

/** The name of the plugin package the consumer project carries. */
export const MINI_PLUGIN = 'berth-runtime-mini';

/**
 * Writes the consumer project into `dir`: a package.json that depends on every tarball
 * (`file:`), on vitest from the registry, and on the local plugin; the plugin; its test.
 */
export async function writeConsumer(dir: string, packed: readonly PackedPackage[], vitestRange: string): Promise<void> {
  await mkdir(path.join(dir, MINI_PLUGIN), { recursive: true });
  const dependencies: Record<string, string> = { vitest: vitestRange, [MINI_PLUGIN]: `file:./${MINI_PLUGIN}` };
  const overrides: Record<string, string> = {};
  for (const pkg of packed) {
    dependencies[pkg.name] = `file:${pkg.tarball}`;
    // Every Berth package resolves to the tarball, never to the registry.
    overrides[pkg.name] = `$${pkg.name}`;
  }
  await writeJson(path.join(dir, 'package.json'), { name: 'berth-consumer', private: true, type: 'module', dependencies, overrides });
  await writeJson(path.join(dir, MINI_PLUGIN, 'package.json'), {
    name: MINI_PLUGIN,
    version: '0.1.0',
    type: 'module',
    exports: { '.': './index.js' },
    peerDependencies: { '@berth/runtime': '*', '@berth/runtime-dummy': '*' },
  });
  // The plugin: its own descriptor, built on the contract's defineRuntime; the engine
  // underneath is the in-memory one so the project needs no container engine.
  await writeFile(
    path.join(dir, MINI_PLUGIN, 'index.js'),
    `import { CONTRACT_VERSION, defineRuntime } from '@berth/runtime';
import { dummyRuntime } from '@berth/runtime-dummy';

const engine = dummyRuntime();

export const runtime = defineRuntime({
  name: 'mini',
  version: '0.1.0',
  contract: CONTRACT_VERSION,
  // The in-memory engine underneath, under the plugin's own name.
  create: async (ctx, config) => {
    const inner = await engine.create(ctx, config);
    return new Proxy(inner, {
      get: (target, key) => {
        if (key === 'name') return 'mini';
        const value = Reflect.get(target, key, target);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
  },
});
export default runtime;
`,
  );
  await writeFile(
    path.join(dir, 'conformance.test.js'),
    `import { background } from '@berth/context';
import { runtimeConformance } from '@berth/runtime-conformance';
import { runtime } from '${MINI_PLUGIN}';

runtimeConformance('mini', (config) => runtime.create(background(), config));
`,
  );
  await writeFile(path.join(dir, 'vitest.config.js'), `export default { test: { include: ['*.test.js'], testTimeout: 60000, hookTimeout: 60000 } };\n`);
}

/**
 * `npm install` in the consumer project (the registry serves vitest and third-party deps). npm
 * has been seen to stall for good on this machine's registry connection, so each attempt is
 * bounded (4 min) and killed, and the install is tried up to three times before it fails with
 * what npm printed.
 */
export async function npmInstall(dir: string, attempts = 3, attemptTimeoutMs = 240_000): Promise<string> {
  const problems: string[] = [];
  for (let attempt = 1; attempt <= attempts; attempt++) {
    try {
      const { stdout, stderr } = await run(
        'npm',
        ['install', '--no-audit', '--no-fund', '--prefer-offline', '--fetch-timeout=60000', '--fetch-retries=2', '--loglevel=error'],
        {
          cwd: dir,
          maxBuffer: 64 * 1024 * 1024,
          timeout: attemptTimeoutMs,
          killSignal: 'SIGKILL',
          env: { ...process.env, npm_config_update_notifier: 'false' },
        },
      );
      return stdout + stderr;
    } catch (error) {
      const e = error as { killed?: boolean; stderr?: string; message: string };
      problems.push(`attempt ${attempt}: ${e.killed ? `no answer within ${attemptTimeoutMs / 1000} s, killed` : (e.stderr || e.message).trim().slice(-2000)}`);
    }
  }
  throw new Error(`npm install of the consumer project failed ${attempts} times:\n${problems.join('\n')}`);
}

/** Vitest's JSON report of the consumer's conformance run. */
export interface ConsumerReport {
  numPassedTests: number;
  numFailedTests: number;
  numPendingTests: number;
  success: boolean;
}

/** Runs the consumer's conformance test with its own vitest; resolves the JSON report. */
export async function runConformance(dir: string): Promise<{ report: ConsumerReport; output: string }> {
  const reportFile = path.join(dir, 'report.json');
  let output: string;
  try {
    const { stdout, stderr } = await run('npx', ['vitest', 'run', '--reporter=json', `--outputFile=${reportFile}`], {
      cwd: dir,
      maxBuffer: 64 * 1024 * 1024,
      // The consumer is not the workspace: no source condition, no report dir of ours.
      env: { ...process.env, BERTH_TEST_REPORT_DIR: '', NODE_OPTIONS: '' },
    });
    output = stdout + stderr;
  } catch (error) {
    const e = error as { stdout?: string; stderr?: string };
    output = `${e.stdout ?? ''}${e.stderr ?? ''}`;
  }
  const report = JSON.parse(await readFile(reportFile, 'utf8')) as ConsumerReport;
  return { report, output };
}

async function writeJson(file: string, value: unknown): Promise<void> {
  await writeFile(file, `${JSON.stringify(value, null, 2)}\n`);
}
