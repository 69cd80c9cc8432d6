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
 * The plugin a team writes outside the repository, as its own package: a host-process runtime
 * under its own name, built on `@berth/runtime` (its own installed copy) and
 * `@berth/runtime-host`. Its only export is a named factory (no default, no `runtime`); it checks
 * its options with its own `RuntimeError('InvalidConfig')`, and exports the conformance options
 * (the capabilities a host runtime lacks) that both its vitest test and `berth runtimes verify` use.
 */
const MINI_PLUGIN_SOURCE = `import { CONTRACT_VERSION, defineRuntime, RuntimeError } from '@berth/runtime';
import { hostRuntime } from '@berth/runtime-host';
import path from 'node:path';

/** The plugin: \`miniRuntime({ root })\`, steps as local processes under \`root\`. */
export function miniRuntime(options = {}) {
  for (const key of Object.keys(options)) {
    if (key !== 'root') throw new RuntimeError('InvalidConfig', \`unknown option \${JSON.stringify(key)}; the mini runtime takes root\`, { runtime: 'mini', operation: 'options' });
  }
  if (options.root !== undefined && !path.isAbsolute(options.root)) {
    throw new RuntimeError('InvalidConfig', \`option root must be an absolute path; got \${JSON.stringify(options.root)}\`, { runtime: 'mini', operation: 'options' });
  }
  const host = hostRuntime({ ...(options.root === undefined ? {} : { root: options.root }), warn: () => undefined });
  return defineRuntime({
    name: 'mini',
    version: '0.1.0',
    contract: CONTRACT_VERSION,
    capabilities: ['hostWorkspace'],
    async create(ctx, config) {
      const inner = await host.create(ctx, config);
      return new Proxy(inner, {
        get: (target, key) => {
          if (key === 'name') return 'mini';
          const value = Reflect.get(target, key, target);
          return typeof value === 'function' ? value.bind(target) : value;
        },
      });
    },
  });
}

/** What the conformance suite should know: the capabilities a host runtime lacks, with why. */
export const conformance = {
  skip: {
    images: 'steps run on the host: there are no images',
    fixedWorkspacePath: 'each build gets its own directory; workspacePath is mapped onto it',
    user: "steps run as the worker's user",
    serviceNetworking: 'no services',
    privileged: "steps run with the worker's own privileges",
    ...(process.getuid?.() === 0 ? { confinement: 'the worker runs as root, and so do its steps' } : {}),
  },
};
`;

/**
 * Writes the plugin's package into `dir` (to be packed with `npm pack`): its manifest, with
 * `@berth/runtime` and `@berth/runtime-host` as peers, and its module.
 */
export async function writePlugin(dir: string): Promise<void> {
  await mkdir(dir, { recursive: true });
  await writeJson(path.join(dir, 'package.json'), {
    name: MINI_PLUGIN,
    version: '0.1.0',
    type: 'module',
    exports: { '.': './index.js' },
    peerDependencies: { '@berth/runtime': '*', '@berth/runtime-host': '*' },
  });
  await writeFile(path.join(dir, 'index.js'), MINI_PLUGIN_SOURCE);
}

/** Packs a folder with plain `npm pack` into `destination`; resolves the tarball's path. */
export async function npmPack(dir: string, destination: string): Promise<string> {
  const { stdout } = await run('npm', ['pack', '--pack-destination', destination, '--json', '--loglevel=error'], { cwd: dir });
  const [packed] = JSON.parse(stdout) as { filename: string }[];
  if (!packed) throw new Error(`npm pack ${dir} printed no package`);
  return path.join(destination, packed.filename);
}

/**
 * Writes the consumer project into `dir`: a package.json that depends on every tarball (the
 * Berth packages, the `berth` command among them, and the plugin's), on vitest from the registry;
 * the plugin's conformance test.
 */
export async function writeConsumer(dir: string, packed: readonly PackedPackage[], pluginTarball: string, vitestRange: string): Promise<void> {
  await mkdir(dir, { recursive: true });
  const dependencies: Record<string, string> = { vitest: vitestRange, [MINI_PLUGIN]: `file:${pluginTarball}` };
  const overrides: Record<string, string> = {};
  for (const pkg of packed) {
    dependencies[pkg.name] = `file:${pkg.tarball}`;
    // Every Berth package resolves to the tarball, never to the registry.
    overrides[pkg.name] = `$${pkg.name}`;
  }
  await writeJson(path.join(dir, 'package.json'), { name: 'berth-consumer', private: true, type: 'module', dependencies, overrides });
  await writeFile(
    path.join(dir, 'conformance.test.js'),
    `import { runtimeConformance } from '@berth/runtime-conformance';
import { conformance, miniRuntime } from '${MINI_PLUGIN}';

runtimeConformance('mini', miniRuntime(), conformance);
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

/** What one run of the installed `berth` printed, and its exit status. */
export interface BerthRun {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * Runs the `berth` command npm installed in the consumer project (`node_modules/.bin/berth`, as a
 * user types it) in `cwd`, without colours and without the workspace's environment.
 */
export async function runInstalledBerth(consumer: string, args: readonly string[], cwd: string, timeoutMs = 300_000): Promise<BerthRun> {
  const env: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: '1', NODE_OPTIONS: '', BERTH_TEST_REPORT_DIR: '' };
  // As in a user's shell: not the workspace's (pnpm sets NODE_PATH for the scripts it runs).
  delete env.BERTH_FROM_SOURCE;
  delete env.NODE_PATH;
  try {
    const { stdout, stderr } = await run(path.join(consumer, 'node_modules', '.bin', 'berth'), [...args], {
      cwd,
      env,
      maxBuffer: 64 * 1024 * 1024,
      timeout: timeoutMs,
    });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const e = error as { code?: number | string; stdout?: string; stderr?: string; message: string };
    if (typeof e.code !== 'number') throw error;
    return { code: e.code, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
  }
}

async function writeJson(file: string, value: unknown): Promise<void> {
  await writeFile(file, `${JSON.stringify(value, null, 2)}\n`);
}
