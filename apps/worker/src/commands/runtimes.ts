import type { Command } from 'commander';
import { CommandError, EXIT } from '../exit-codes.ts';
import type { Io } from '../io.ts';
import { collect } from './compile.ts';
import { formatListing, listRuntimes } from '../plugins/list.ts';
import { loadRuntime } from '../plugins/load.ts';
import { pluginConformanceOptions, skipFlags, tableHeader, tableRow, verdict } from '../plugins/verify.ts';
import { parseAssignments } from '../options.ts';

/** `berth runtimes`: lists the runtime plugins --runtime can load; `berth runtimes verify <plugin>` certifies one. */
export function runtimesCommand(program: Command, io: Io): void {
  const runtimes = program
    .command('runtimes')
    .description('list the runtime plugins --runtime can load: built-ins, and berth-runtime-* packages installed here')
    .option('--json', 'print JSON')
    .action(async (flags: { json?: boolean }) => {
      const listings = await listRuntimes(io.cwd);
      io.stdout.write(flags.json ? `${JSON.stringify(listings, null, 2)}\n` : formatListing(listings));
    });
  runtimes
    .command('verify')
    .description(
      'run the Runtime conformance suite against a plugin, loaded as berth exec loads it, and print a table of its cases; exit 1 when a required case fails',
    )
    .argument('<plugin>', 'a built-in runtime, an installed plugin package, or a path to a plugin module')
    .option('--runtime-option <key=value>', "an option for the plugin's factory (repeatable)", collect, [])
    .option('--image <image>', "a busybox-like image present where the runtime runs (default: the plugin's conformance export, else berth/busybox:1.35)")
    .option('--skip <capability=reason>', 'a capability the runtime lacks, with the reason (repeatable; adds to the plugin’s own)', collect, [])
    .option('--filter <text>', 'run only the cases whose group or name contains this text (repeatable)', collect, [])
    .option('--json', 'print the results as JSON')
    .addHelpText(
      'after',
      `
A plugin module may export \`conformance\`: the suite's options (\`{ skip: { user: 'why' }, image }\`),
or a function returning them. Cases of an optional capability (outputs, hostWorkspace) run only
when the descriptor declares it. Exit status: 0 it conforms, 1 a case failed, 2 bad usage.`,
    )
    .action(async (spec: string, flags: { runtimeOption: string[]; image?: string; skip: string[]; filter: string[]; json?: boolean }) => {
      const options = parseAssignments(flags.runtimeOption, '--runtime-option');
      const skip = skipFlags(flags.skip);
      const { descriptor, exports } = await loadRuntime(spec, { cwd: io.cwd, options });
      const own = await pluginConformanceOptions(exports, spec);
      // Loaded only now: the suite and its cases are the command's whole weight.
      const { verifyConformance } = await import('@berth/runtime-conformance/runner');
      if (!flags.json)
        io.stdout.write(`Verifying ${descriptor.name} ${descriptor.version} (${spec}) against the Runtime conformance suite\n\n${tableHeader()}`);
      const report = await verifyConformance(descriptor, {
        ...own,
        ...(flags.image === undefined ? {} : { image: flags.image }),
        skip: { ...own.skip, ...skip },
        ...(flags.filter.length === 0 ? {} : { filter: flags.filter }),
        ...(flags.json ? {} : { onResult: (result) => io.stdout.write(tableRow(result)) }),
      }).catch((error: unknown) => {
        // Bad options (an unknown capability in skip, a relative workspace path) are usage.
        if (error instanceof TypeError) throw new CommandError(error.message.replace(/^\[berth\] runtimeConformance: /, ''), EXIT.usage);
        throw error;
      });
      io.stdout.write(flags.json ? `${JSON.stringify(report, null, 2)}\n` : verdict(descriptor, report.results));
      io.exitCode = report.passed ? EXIT.ok : EXIT.failed;
    });
}
