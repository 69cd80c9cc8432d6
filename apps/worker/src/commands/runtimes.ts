import type { Command } from 'commander';
import type { Io } from '../io.ts';
import { formatListing, listRuntimes } from '../plugins/list.ts';

/** `berth runtimes`: lists the runtime plugins `--runtime` can load. */
export function runtimesCommand(program: Command, io: Io): void {
  program
    .command('runtimes')
    .description('list the runtime plugins --runtime can load: built-ins, and berth-runtime-* packages installed here')
    .option('--json', 'print JSON')
    .action(async (flags: { json?: boolean }) => {
      const listings = await listRuntimes(io.cwd);
      io.stdout.write(flags.json ? `${JSON.stringify(listings, null, 2)}\n` : formatListing(listings));
    });
}
