// The idle worker's memory-reducing collection (memory.ts), in this process.
import { execFile } from 'node:child_process';
import v8 from 'node:v8';
import { promisify } from 'node:util';
import { pino } from 'pino';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { readFileSync } from 'node:fs';
import { collectGarbageNow, EXPOSED_GC, MemorySettler } from './memory.ts';

const run = promisify(execFile);
const youngGeneration = () => v8.getHeapSpaceStatistics().find((s) => s.space_name === 'new_space')!.space_size;

describe('collectGarbageNow', () => {
  it('shrinks a grown young generation', () => {
    // Objects that live through scavenges make V8 grow its young generation.
    const kept: object[] = [];
    for (let i = 0; i < 300_000; i++) kept.push({ i, s: `item ${i}` });
    const grown = youngGeneration();
    kept.length = 0;
    collectGarbageNow();
    expect(youngGeneration()).toBeLessThan(grown);
    expect(youngGeneration()).toBeLessThanOrEqual(4 * 1024 * 1024);
  });

  it('leaves no gc global behind (in a process of its own: test runners may expose one)', async () => {
    const script = `import { collectGarbageNow } from ${JSON.stringify(new URL('./memory.ts', import.meta.url).href)};
collectGarbageNow(); collectGarbageNow();
process.stdout.write(String('gc' in globalThis));`;
    const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script]);
    expect(stdout).toBe('false');
  });

  it('uses the collection `berth start` exposes, without node:vm', async () => {
    expect(readFileSync(new URL('../../bin/berth.js', import.meta.url), 'utf8')).toContain(`'--expose-gc-as=${EXPOSED_GC}'`);
    const script = `import { collectGarbageNow } from ${JSON.stringify(new URL('./memory.ts', import.meta.url).href)};
let calls = 0;
const real = globalThis.${EXPOSED_GC};
globalThis.${EXPOSED_GC} = (options) => { calls++; real(options); };
collectGarbageNow(); collectGarbageNow();
process.stdout.write(JSON.stringify({ calls, vm: process.moduleLoadList.includes('NativeModule vm'), gc: 'gc' in globalThis }));`;
    const { stdout } = await run(process.execPath, [`--expose-gc-as=${EXPOSED_GC}`, '--input-type=module', '-e', script]);
    expect(JSON.parse(stdout)).toEqual({ calls: 4, vm: false, gc: false });
  });

  it('drops the code of what ran just before it, with the code age `berth start` sets (one collection would not)', async () => {
    expect(readFileSync(new URL('../../bin/berth.js', import.meta.url), 'utf8')).toContain(`'--bytecode-old-age=3'`);
    // V8's %GetOptimizationStatus: bit 18 (kIsLazy) is set when the function has no bytecode.
    const script = `import { collectGarbageNow } from ${JSON.stringify(new URL('./memory.ts', import.meta.url).href)};
function build(items) { return items.map((i) => i * 2).join(','); }
build([1, 2, 3]);
const lazy = () => (%GetOptimizationStatus(build) & (1 << 18)) !== 0;
const before = lazy();
await new Promise((resolve) => setTimeout(resolve, 10));
collectGarbageNow();
process.stdout.write(JSON.stringify({ before, after: lazy() }));`;
    const flags = ['--allow-natives-syntax', '--bytecode-old-age=3', '--flush-baseline-code', `--expose-gc-as=${EXPOSED_GC}`];
    const { stdout } = await run(process.execPath, [...flags, '--input-type=module', '-e', script]);
    expect(JSON.parse(stdout)).toEqual({ before: false, after: true });
  });
});

describe('MemorySettler', () => {
  afterEach(() => vi.useRealTimers());

  function settler(idle: () => boolean) {
    const lines: string[] = [];
    const log = pino({ level: 'debug' }, { write: (line: string) => lines.push((JSON.parse(line) as { msg: string }).msg) });
    return { settler: new MemorySettler(log, idle, 100), lines };
  }

  it('collects once after the delay when idle, one request at a time', () => {
    vi.useFakeTimers();
    const { settler: s, lines } = settler(() => true);
    s.soon();
    s.soon();
    vi.advanceTimersByTime(100);
    expect(lines).toEqual(['idle: memory given back']);
  });

  it('does not collect when a build runs by then, nor after stop()', () => {
    vi.useFakeTimers();
    let idle = false;
    const { settler: s, lines } = settler(() => idle);
    s.soon();
    vi.advanceTimersByTime(100);
    idle = true;
    s.soon();
    s.stop();
    vi.advanceTimersByTime(1_000);
    s.soon();
    vi.advanceTimersByTime(1_000);
    expect(lines).toEqual([]);
  });
});
