/** Polling and metric reading for the fleet lane. */

/** Polls `check` every 500 ms until it holds; rejects naming `what` after `timeoutMs`. */
export async function waitFor(what: string, check: () => boolean | Promise<boolean>, timeoutMs: number): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 500));
  }
}

/** The items a worker popped, from its `/metrics` text (berth_worker_queue_pops_total{result="item"}). */
export function pops(metrics: string): number {
  const m = /^berth_worker_queue_pops_total\{result="item"\} (\d+)$/m.exec(metrics);
  return m ? Number(m[1]) : 0;
}
