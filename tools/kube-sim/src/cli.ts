#!/usr/bin/env node
// kube-sim CLI: starts a kube-sim, prints the kubeconfig path, and prints the counters on exit.
//
//   node src/cli.ts [--port N] [--dir DIR] [--history N] [--bookmark-ms N] [--pull-backoff-ms N]

import { parseArgs } from 'node:util';
import { startKubeSim } from './sim.ts';

const { values } = parseArgs({
  options: {
    port: { type: 'string', default: '0' },
    dir: { type: 'string' },
    history: { type: 'string' },
    'bookmark-ms': { type: 'string' },
    'pull-backoff-ms': { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  },
});

if (values.help) {
  console.log('usage: kube-sim [--port N] [--dir DIR] [--history N] [--bookmark-ms N] [--pull-backoff-ms N]');
  console.log('A Kubernetes API TEST DOUBLE whose pods run in Docker. Prints the kubeconfig path; Ctrl-C prints the counters and cleans up.');
  process.exit(0);
}

const num = (v: string | undefined): number | undefined => (v === undefined ? undefined : Number(v));
const sim = await startKubeSim({
  port: Number(values.port),
  ...(values.dir ? { dir: values.dir } : {}),
  ...(values.history ? { historyLimit: num(values.history) } : {}),
  ...(values['bookmark-ms'] ? { bookmarkIntervalMs: num(values['bookmark-ms']) } : {}),
  ...(values['pull-backoff-ms'] ? { imagePullBackoff: { initialMs: num(values['pull-backoff-ms']) } } : {}),
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
