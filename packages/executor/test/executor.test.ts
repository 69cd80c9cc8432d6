import { background } from '@berth/context';
import { describe, expect, it } from 'vitest';
import { runBuild } from '../src/run-build.ts';
import { ctn, dummy, makeBuild, RecordingReporter, secret, stage } from './helpers.ts';

describe('runBuild on the dummy runtime', () => {
  it('runs steps in order and succeeds', async () => {
    const { runtime } = await dummy();
    const reporter = new RecordingReporter();
    const build = makeBuild({ steps: [ctn('one', { commands: ['echo hello one'] }), ctn('two', { commands: ['echo hello two'] })] });
    const result = await runBuild(background(), { build, runtime, reporter, host: 'test-host', version: '1.2.3' });
    expect(result.status).toBe('success');
    expect(reporter.statuses('one')).toEqual(['running', 'success']);
    expect(reporter.statuses('two')).toEqual(['running', 'success']);
    expect(reporter.log('one')).toContain('hello one');
    expect(reporter.log('two')).toContain('hello two');
    expect(reporter.log('init')).toContain('runtime: dummy');
    expect(reporter.builds.map((b) => b.status)).toEqual(['running', 'success']);
  });
});
