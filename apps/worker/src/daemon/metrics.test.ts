// /metrics names: counters end in _total, a build-limit gauge and berth_worker_version_info as
// GitLab Runner exposes them, and Node's default metrics under their standard names.
import { describe, expect, it } from 'vitest';
import { DaemonMetrics } from './metrics.ts';

describe('DaemonMetrics', () => {
  it('names counters _total, exposes the build limit and version, and the Node defaults unprefixed', async () => {
    const m = new DaemonMetrics();
    m.describe({ version: '1.2.3', buildLimit: 4 });
    let restarts = 2;
    m.watchRestartsFrom(() => restarts);
    const text = await m.registry.metrics();
    const counters = [...text.matchAll(/^# TYPE (\S+) counter$/gm)].map((x) => x[1]!);
    expect(counters.length).toBeGreaterThan(5);
    expect(counters.filter((n) => !n.endsWith('_total'))).toEqual([]);
    expect(text).toMatch(/^berth_worker_build_limit 4$/m);
    expect(text).toMatch(/^berth_worker_version_info\{version="1\.2\.3"\} 1$/m);
    expect(text).toMatch(/^process_cpu_user_seconds_total /m);
    expect(text).toMatch(/^nodejs_heap_size_total_bytes /m);
    expect(text).not.toMatch(/^berth_worker_(process|nodejs)_/m);
    expect(text).toMatch(/^berth_worker_kubernetes_watch_restarts_total 2$/m);
    restarts = 5;
    expect(await m.registry.metrics()).toMatch(/^berth_worker_kubernetes_watch_restarts_total 5$/m);
  });
});
