#!/usr/bin/env node
// kube-sim CLI: starts a kube-sim, prints the kubeconfig path, and prints the counters on exit.
//
//   node src/cli.ts [--port N] [--dir DIR] [--history N] [--history-window-ms N] [--bookmark-ms N]
//                   [--pull-backoff-ms N] [--pull-backoff-max-ms N] [--relist-ms N] [--sync-waits-for-relist] [--lenient knob,knob]

import { parseArgs } from 'node:util';
import { startKubeSim, type LenientOptions } from './sim.ts';

const { values } = parseArgs({
  options: {
    port: { type: 'string', default: '0' },
    dir: { type: 'string' },
    history: { type: 'string' },
    'bookmark-ms': { type: 'string' },
    'pull-backoff-ms': { type: 'string' },
    'pull-backoff-max-ms': { type: 'string' },
    'history-window-ms': { type: 'string' },
    'relist-ms': { type: 'string' },
    'sync-waits-for-relist': { type: 'boolean' },
    lenient: { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  },
});

const lenientKnobs = ['retryFailedImageSwitch', 'parallelStarts', 'parallelPatchKills', 'immediateStatus', 'specImageNames', 'noEventSpamFilter'] as const;

if (values.help) {
  console.log(
    'usage: kube-sim [--port N] [--dir DIR] [--history N] [--history-window-ms N] [--bookmark-ms N] [--pull-backoff-ms N] [--pull-backoff-max-ms N] [--relist-ms N] [--sync-waits-for-relist] [--lenient knob,knob]',
  );
  console.log(`lenient knobs (off by default; a real kubelet has none of them): ${lenientKnobs.join(', ')}`);
  console.log('A Kubernetes API TEST DOUBLE whose pods run in Docker. Prints the kubeconfig path; Ctrl-C prints the counters and cleans up.');
  process.exit(0);
}

const num = (v: string | undefined): number | undefined => (v === undefined ? undefined : Number(v));
const lenient: LenientOptions = {};
for (const knob of (values.lenient ?? '')
  .split(',')
  .map((k) => k.trim())
  .filter(Boolean)) {
  if (!(lenientKnobs as readonly string[]).includes(knob)) {
    console.error(`kube-sim: unknown lenient knob "${knob}"; known: ${lenientKnobs.join(', ')}`);
    process.exit(2);
  }
  lenient[knob as (typeof lenientKnobs)[number]] = true;
}
const sim = await startKubeSim({
  port: Number(values.port),
  ...(values.dir ? { dir: values.dir } : {}),
  ...(values.history ? { historyLimit: num(values.history) } : {}),
  ...(values['bookmark-ms'] ? { bookmarkIntervalMs: num(values['bookmark-ms']) } : {}),
  ...(values['pull-backoff-ms'] || values['pull-backoff-max-ms']
    ? {
        imagePullBackoff: {
          ...(values['pull-backoff-ms'] ? { initialMs: Number(values['pull-backoff-ms']) } : {}),
          ...(values['pull-backoff-max-ms'] ? { maxMs: Number(values['pull-backoff-max-ms']) } : {}),
        },
      }
    : {}),
  ...(values['history-window-ms'] ? { historyWindowMs: num(values['history-window-ms']) } : {}),
  ...(values['relist-ms'] ? { statusRelistMs: num(values['relist-ms']) } : {}),
  ...(values['sync-waits-for-relist'] ? { syncWaitsForRelist: true } : {}),
  lenient,
});

console.log(`kube-sim (a Kubernetes API test double) listening on ${sim.url}`);
console.log(`kubeconfig: ${sim.kubeconfigPath}`);
console.log(`try: kubectl --kubeconfig ${sim.kubeconfigPath} get pods`);

let stopping = false;
const stop = async (signal: string): Promise<void> => {
  if (stopping) return;
  stopping = true;
  console.log(`\n${signal}: counters`);
  console.log(JSON.stringify(sim.counters.snapshot(), null, 2));
  await sim.close();
  process.exit(0);
};
process.on('SIGINT', () => void stop('SIGINT'));
process.on('SIGTERM', () => void stop('SIGTERM'));
