#!/usr/bin/env node
// The `berth` command. Runs the worker from its TypeScript source on Node 24. In the repository,
// workspace packages resolve from their sources too, through the "@berth/source" export
// condition added here by a resolve hook; installed (the worker image), they run from dist/.
import { existsSync, readFileSync } from 'node:fs';
import { registerHooks } from 'node:module';

const [major] = process.versions.node.split('.').map(Number);
if (major < 24) {
  process.stderr.write(
    `berth needs Node.js 24 or newer; this is ${process.version}.\n` +
      'Run `bash tools/bootstrap.sh` and `source tools/env.sh` in the Berth checkout to use the project-local Node 24.\n',
  );
  process.exit(2);
}

// `berth --version` answers before anything else loads: scripts and health checks call it
// often, and it should cost what `docker --version` costs, not a TypeScript load of the tree.
const args = process.argv.slice(2);
if (args.length === 1 && (args[0] === '--version' || args[0] === '-V')) {
  const { version } = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));
  process.stdout.write(`${version}\n`);
  process.exit(0);
}

const inWorkspace = existsSync(new URL('../../../pnpm-workspace.yaml', import.meta.url));
if (inWorkspace)
  registerHooks({
    resolve(specifier, context, nextResolve) {
      return nextResolve(specifier, { ...context, conditions: [...context.conditions, '@berth/source'] });
    },
  });

const { main } = await import('../src/main.ts');
const code = await main(process.argv);
process.exitCode = code;
// Everything a command opened is closed by now; should a handle still hold the process, do not hang.
setTimeout(() => {
  process.stderr.write('berth: a resource was still open 10 s after the command finished; exiting anyway\n');
  process.exit(code);
}, 10_000).unref();
