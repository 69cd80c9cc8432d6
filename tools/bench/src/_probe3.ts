import { VelaSim } from '@berth/vela-sim';
import { readFileSync } from 'node:fs';
import { startWorker, memoryOf, runOneBuild, waitUntilPopping } from './worker-daemon.ts';
const sim = await VelaSim.start();
for (const flags of (process.env.FLAGSETS ?? '').split('|')) {
  const env: Record<string,string> = {};
  const nodeArgs: string[] = [];
  for (const f of flags.split(' ').filter(Boolean)) { if (f.includes('=') && !f.startsWith('--')) { const [k, v] = f.split('='); env[k!] = v!; } else nodeArgs.push(f); }
  const w = await startWorker(sim, { kind: 'command', label: 'probe', env, nodeArgs });
  await new Promise((r) => setTimeout(r, 6000));
  const idle = memoryOf(w.pid);
  const roll = readFileSync(`/proc/${w.pid}/smaps_rollup`, 'utf8');
  const g = (k: string) => (Number(new RegExp(`^${k}:\\s+(\\d+)`, 'm').exec(roll)?.[1]) / 1024).toFixed(1);
  let t = Date.now();
  for (let i = 0; i < Number(process.env.BUILDS ?? 0); i++) { const s = performance.timeOrigin + performance.now(); await runOneBuild(sim, w, 'p'); await waitUntilPopping(sim, s); }
  const bt = Date.now() - t;
  await new Promise((r) => setTimeout(r, 4000));
  const after = memoryOf(w.pid);
  console.log(`[${flags}] idle ${idle.rssMb.toFixed(1)} (anon ${g('Anonymous')} file ${g('Shared_Clean')}) after ${after.rssMb.toFixed(1)} peak ${after.hwmMb.toFixed(1)} builds ${bt}ms`);
  await w.stop();
}
await sim.close();
