// The deployment files: the Kubernetes Role is least privilege, the Deployment's environment is a
// valid `berth start` configuration, and the systemd unit waits out the drain.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { parseStartConfig } from '../src/commands/start.ts';
import { SETTINGS, parseGoDuration } from '../src/vela/config.ts';

const DEPLOY = path.join(import.meta.dirname, '../deploy');
interface Container {
  args: string[];
  readinessProbe: { httpGet: { path: string } };
  livenessProbe: { httpGet: { path: string } };
  env: Array<{ name: string; value?: string; valueFrom?: unknown }>;
  ports: Array<{ containerPort: number }>;
  volumeMounts: Array<{ name: string; mountPath: string }>;
}
interface Doc {
  kind: string;
  metadata: { name: string; namespace?: string };
  rules?: unknown[];
  roleRef?: unknown;
  subjects?: unknown[];
  spec: {
    serviceName?: string;
    template: { spec: { serviceAccountName: string; terminationGracePeriodSeconds: number; containers: Container[]; volumes?: Array<{ name: string }> } };
    volumeClaimTemplates?: Array<{ metadata: { name: string } }>;
  };
}
const docs = (file: string): Doc[] =>
  parseAllDocuments(readFileSync(path.join(DEPLOY, 'kubernetes', file), 'utf8')).map((d) => {
    expect(d.errors).toEqual([]);
    return d.toJS() as Doc;
  });

const KNOWN_ENV = new Set([
  ...Object.values(SETTINGS).flatMap((s) => s.env),
  'BERTH_DRAIN_GRACE',
  'BERTH_STOP_GRACE',
  'BERTH_LISTEN',
  'BERTH_STATE_DIR',
  'BERTH_SERVER_TIMEOUT',
  'BERTH_KUBERNETES_PAUSE_IMAGE',
  'POD_NAME',
  'POD_NAMESPACE',
]);

describe('deploy/kubernetes', () => {
  const rbac = docs('rbac.yaml');
  const deployment = docs('statefulset.yaml');

  it('the Role grants exactly pods get/list/watch/create/patch/delete, pods/log get, events list (never watched), in one namespace', () => {
    const role = rbac.find((d) => d.kind === 'Role')!;
    expect(role.metadata.namespace).toBe('vela');
    expect(role.rules).toEqual([
      { apiGroups: [''], resources: ['pods'], verbs: ['get', 'list', 'watch', 'create', 'patch', 'delete'] },
      { apiGroups: [''], resources: ['pods/log'], verbs: ['get'] },
      { apiGroups: [''], resources: ['events'], verbs: ['list'] },
    ]);
    expect(rbac.some((d) => d.kind === 'ClusterRole' || d.kind === 'ClusterRoleBinding')).toBe(false);
    const binding = rbac.find((d) => d.kind === 'RoleBinding')!;
    expect(binding.roleRef).toMatchObject({ kind: 'Role', name: 'berth-worker' });
    expect(binding.subjects).toEqual([{ kind: 'ServiceAccount', name: 'berth-worker', namespace: 'vela' }]);
    expect(rbac.find((d) => d.kind === 'ServiceAccount')?.metadata.name).toBe('berth-worker');
  });

  it('the StatefulSet runs `berth start` with a valid configuration, probes, and a grace period longer than the drain', () => {
    const dep = deployment.find((d) => d.kind === 'StatefulSet')!;
    const pod = dep.spec.template.spec;
    expect(pod.serviceAccountName).toBe('berth-worker');
    const c = pod.containers[0]!;
    expect(c.args).toEqual(['start']);
    expect(c.readinessProbe.httpGet.path).toBe('/ready');
    expect(c.livenessProbe.httpGet.path).toBe('/health');
    const env: Record<string, string> = {};
    for (const e of c.env) {
      expect(KNOWN_ENV.has(e.name), `${e.name} is a setting berth start reads`).toBe(true);
      env[e.name] = e.value ?? (e.name === 'VELA_SERVER_SECRET' ? 'secret' : 'vela');
    }
    for (const [k, v] of Object.entries(env)) env[k] = v.replace('$(POD_NAME)', 'berth-worker-abc12').replace('$(POD_NAMESPACE)', 'vela');
    const { config, extras } = parseStartConfig({}, env);
    expect(config.runtime.driver).toBe('kubernetes');
    expect(config.worker.hostname).toBe('berth-worker-abc12.berth-worker.vela.svc');
    expect(config.worker.port).toBe(c.ports[0]?.containerPort);
    expect(pod.terminationGracePeriodSeconds * 1000).toBeGreaterThan(extras.drainGraceMs + extras.stopGraceMs);
    expect(dep.spec.serviceName).toBe(deployment.find((d) => d.kind === 'Service')?.metadata.name);
  });

  it('keeps the worker id and its state across pod restarts: stable pod names and a claimed state volume', () => {
    const set = deployment.find((d) => d.kind === 'StatefulSet')!;
    const c = set.spec.template.spec.containers[0]!;
    const stateDir = c.env.find((e) => e.name === 'BERTH_STATE_DIR')?.value;
    const mount = c.volumeMounts.find((m) => m.mountPath === stateDir);
    expect(mount, 'BERTH_STATE_DIR is a mounted volume').toBeDefined();
    // A claim template, not an emptyDir: the volume outlives the pod.
    expect(set.spec.volumeClaimTemplates?.map((t) => t.metadata.name)).toContain(mount!.name);
    expect(set.spec.template.spec.volumes?.some((v) => v.name === mount!.name)).toBe(false);
    // The id is the pod's stable name under the headless service.
    expect(c.env.find((e) => e.name === 'VELA_WORKER_ADDR')?.value).toContain('$(POD_NAME).berth-worker.');
  });

  it('a PodDisruptionBudget evicts one worker at a time, and no preStop delays the drain SIGTERM starts', () => {
    const set = deployment.find((d) => d.kind === 'StatefulSet')!;
    const [pdb] = docs('pdb.yaml') as unknown as Array<{ kind: string; spec: { maxUnavailable: number; selector: unknown } }>;
    expect(pdb?.kind).toBe('PodDisruptionBudget');
    expect(pdb?.spec.maxUnavailable).toBe(1);
    expect(pdb?.spec.selector).toEqual((set.spec as unknown as { selector: unknown }).selector);
    expect((set.spec.template.spec.containers[0] as unknown as { lifecycle?: unknown }).lifecycle).toBeUndefined();
    expect(readFileSync(path.join(DEPLOY, 'kubernetes/kustomization.yaml'), 'utf8')).toMatch(/- pdb\.yaml/);
  });
});

describe('the young generation of V8 in the shipped forms (issue 28 item 3)', () => {
  // V8 grows the young generation to its largest semi-spaces (16 MB or more) while the worker
  // loads and while a build's logs stream, and keeps them; a 1 MB semi-space bounds the peak
  // (tools/bench worker-memory: 94 -> 85 MB over five builds). NODE_OPTIONS carries it, so every
  // way the image is started (its entrypoint, the host-network overlay's shell) gets it.
  it('the image sets NODE_OPTIONS=--max-semi-space-size=1', () => {
    const dockerfile = readFileSync(path.join(DEPLOY, 'docker/Dockerfile'), 'utf8');
    expect(dockerfile).toMatch(/^ENV .*\bNODE_OPTIONS=--max-semi-space-size=1\b/m);
  });

  it('the systemd unit sets NODE_OPTIONS=--max-semi-space-size=1', () => {
    const unit = readFileSync(path.join(DEPLOY, 'systemd/berth-worker.service'), 'utf8');
    expect(unit).toMatch(/^Environment=NODE_OPTIONS=--max-semi-space-size=1$/m);
  });
});

describe('deploy/systemd', () => {
  const unit = readFileSync(path.join(DEPLOY, 'systemd/berth-worker.service'), 'utf8');
  const value = (key: string): string | undefined => new RegExp(`^${key}=(.*)$`, 'm').exec(unit)?.[1];

  it('starts `berth start` after Docker, with its environment file and a private state directory', () => {
    expect(value('ExecStart')).toMatch(/berth\.js start$/);
    expect(value('Requires')).toBe('docker.service');
    expect(value('EnvironmentFile')).toBe('/etc/berth/worker.env');
    expect(value('StateDirectory')).toBe('berth');
    expect(value('StateDirectoryMode')).toBe('0700');
    expect(value('KillSignal')).toBe('SIGTERM');
  });

  it('waits longer than the drain grace before killing', () => {
    const stop = parseGoDuration(value('TimeoutStopSec')!.replace('min', 'm'))!;
    const envFile = readFileSync(path.join(DEPLOY, 'systemd/worker.env.example'), 'utf8');
    const drain = parseGoDuration(/^BERTH_DRAIN_GRACE=(.*)$/m.exec(envFile)?.[1] ?? '10m')!;
    expect(stop).toBeGreaterThan(drain + 10_000);
  });

  it('the example environment file is a valid configuration', () => {
    const env = Object.fromEntries(
      readFileSync(path.join(DEPLOY, 'systemd/worker.env.example'), 'utf8')
        .split('\n')
        .filter((l) => /^[A-Z_]+=/.test(l))
        .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
    );
    expect(() => parseStartConfig({}, env)).not.toThrow();
  });
});
