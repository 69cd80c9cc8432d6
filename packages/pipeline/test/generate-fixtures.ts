// Writes test/fixtures/valid/*.json from the compiler's output, for fixtures that have none (or all
// with --update). Run: node test/generate-fixtures.ts. REVIEW every file it writes.
import { readdirSync, writeFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { compileFixture, fixtureForm, FIXTURES } from './fixtures.ts';

const update = process.argv.includes('--update');
for (const file of readdirSync(join(FIXTURES, 'valid')).filter((f) => f.endsWith('.yml'))) {
  const name = file.slice(0, -4);
  const out = join(FIXTURES, 'valid', `${name}.json`);
  if (existsSync(out) && !update) continue;
  const result = compileFixture('valid', name);
  if (!result.ok) {
    console.error(name, JSON.stringify(result.errors, null, 2));
    continue;
  }
  writeFileSync(out, `${JSON.stringify(fixtureForm(result.build), null, 2)}\n`);
  console.log('wrote', out);
}
