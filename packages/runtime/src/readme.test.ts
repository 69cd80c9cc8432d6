import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { CONTRACT_VERSION } from './descriptor.ts';

describe('the contract version rule in the README', () => {
  it('states the current CONTRACT_VERSION, and the plugin example declares it as a literal', () => {
    const readme = readFileSync(path.join(import.meta.dirname, '..', 'README.md'), 'utf8');
    expect(readme).toContain(`**\`CONTRACT_VERSION\` (now \`${CONTRACT_VERSION}\`) is the contract's own version`);
    expect(readme).toContain(`contract: '${CONTRACT_VERSION}', // the CONTRACT_VERSION you wrote against, as a literal`);
  });

  it('re-exports what a plugin needs, so that it depends on @berth/runtime alone', async () => {
    const runtime = await import('./index.ts');
    for (const name of ['background', 'withTimeout', 'errOf', 'Canceled', 'DeadlineExceeded', 'parseImageReference']) {
      expect(runtime, name).toHaveProperty(name);
    }
    const context = await import('@berth/context');
    // The very same objects, not copies: instanceof checks hold across a plugin and the worker.
    expect(runtime.Canceled).toBe(context.Canceled);
  });
});
