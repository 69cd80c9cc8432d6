import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { emptyBuild, emptyContainer } from '@berth/pipeline';
import { LABELS } from '@berth/runtime';
import { PlanError, PodPlan, type PodPlanSettings } from './pod-spec.ts';
import { emptyPodTemplate, loadPodsTemplateFile, parsePodsTemplate, parsePodsTemplateYaml, PodsTemplateError } from './pods-template.ts';

const TEMPLATE = `
apiVersion: go-vela.github.io/v1alpha1
kind: PipelinePodsTemplate
metadata:
  name: ci
spec:
  template:
    metadata:
      labels:
        team: ci
        berth.dev/worker: hijack
      annotations:
        sidecar.istio.io/inject: "false"
    spec:
      nodeSelector:
        disktype: ssd
      tolerations:
        - key: dedicated
          operator: Equal
          value: ci
          effect: NoSchedule
      affinity:
        nodeAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            nodeSelectorTerms:
              - matchExpressions:
                  - key: kubernetes.io/arch
                    operator: In
                    values: [amd64]
      dnsPolicy: "None"
      dnsConfig:
        nameservers: [1.1.1.1]
        searches: [ci.svc.cluster.local]
        options:
          - name: ndots
            value: "2"
      securityContext:
        runAsNonRoot: true
        sysctls:
          - name: net.ipv4.ip_local_port_range
            value: "1024 65535"
      container:
        securityContext:
          capabilities:
            add: [NET_ADMIN]
            drop: [ALL]
`;

function settings(fields: Partial<PodPlanSettings> = {}): PodPlanSettings {
  return {
    namespace: 'ci',
    workerId: 'worker-1',
    pauseImage: 'berth/pause:1',
    workspacePath: '/vela',
    privilegedImages: ['target/vela-docker'],
    volumes: [],
    stopGraceMs: 10_000,
    activeDeadlineSeconds: 3900,
    template: emptyPodTemplate(),
    ...fields,
  };
}

function build() {
  const b = emptyBuild({ id: 'Org_Repo_42' });
  b.services = [emptyContainer({ id: 'service_org_repo_42_redis', name: 'redis', image: 'redis:7', detach: true })];
  b.steps = [
    emptyContainer({
      id: 'step_org_repo_42_test',
      name: 'test',
      image: 'alpine:3.20',
      entrypoint: ['/bin/sh', '-c'],
      commands: ['echo hi'],
      environment: { A: '1' },
    }),
    emptyContainer({ id: 'step_org_repo_42_docker', name: 'docker', image: 'target/vela-docker:v1', privileged: true, pull: 'always' }),
  ];
  return b;
}

describe('PodPlan', () => {
  it('builds the pod: pause images, args, env, labels, deadline, workspace, host aliases, privileged only when allowed', () => {
    const b = build();
    const plan = new PodPlan(b, settings());
    plan.addHostAliases(b);
    plan.addWorkspace();
    for (const c of [...b.services, ...b.steps]) plan.addContainer(c);
    // The executor may extend the environment after setup: it is read at toPod().
    b.steps[0]!.environment.LATE = 'yes';
    const pod = plan.toPod();
    expect(pod.metadata?.name).toMatch(/^org-repo-42-[a-z2-7]{10}$/);
    expect(pod.metadata?.labels).toEqual({ [LABELS.worker]: 'worker-1', [LABELS.build]: 'Org_Repo_42' });
    expect(pod.metadata?.annotations?.['berth.dev/build-id']).toBe('Org_Repo_42');
    const spec = pod.spec!;
    expect(spec.restartPolicy).toBe('Never');
    expect(spec.activeDeadlineSeconds).toBe(3900);
    expect(spec.terminationGracePeriodSeconds).toBe(10);
    expect(spec.hostAliases).toEqual([{ ip: '127.0.0.1', hostnames: ['redis', 'redis.local'] }]);
    expect(spec.volumes).toEqual([{ name: 'workspace', emptyDir: {} }]);
    expect(spec.containers.map((c) => c.image)).toEqual(['berth/pause:1', 'berth/pause:1', 'berth/pause:1']);
    const [redis, test, docker] = spec.containers;
    expect(test?.args).toEqual(['/bin/sh', '-c', 'echo hi']);
    expect(test?.command).toBeUndefined();
    expect(test?.env).toEqual([
      { name: 'A', value: '1' },
      { name: 'LATE', value: 'yes' },
    ]);
    expect(test?.volumeMounts).toEqual([{ name: 'workspace', mountPath: '/vela' }]);
    expect(test?.imagePullPolicy).toBe('IfNotPresent');
    expect(docker?.imagePullPolicy).toBe('Always');
    expect(docker?.securityContext?.privileged).toBe(true);
    expect(redis?.securityContext?.privileged).toBeUndefined();
  });

  it("applies a pods template file; Berth's own labels cannot be overridden", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'berth-template-'));
    try {
      const file = path.join(dir, 'template.yaml');
      await writeFile(file, TEMPLATE);
      const template = await loadPodsTemplateFile(file);
      const b = build();
      const plan = new PodPlan(b, settings({ template }));
      for (const c of b.steps) plan.addContainer(c);
      const pod = plan.toPod();
      expect(pod.metadata?.labels).toMatchObject({ team: 'ci', [LABELS.worker]: 'worker-1' });
      expect(pod.metadata?.annotations).toMatchObject({ 'sidecar.istio.io/inject': 'false', 'berth.dev/build-id': 'Org_Repo_42' });
      expect(pod.spec?.nodeSelector).toEqual({ disktype: 'ssd' });
      expect(pod.spec?.tolerations).toEqual([{ key: 'dedicated', operator: 'Equal', value: 'ci', effect: 'NoSchedule' }]);
      expect(pod.spec?.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution?.nodeSelectorTerms[0]?.matchExpressions?.[0]?.values).toEqual([
        'amd64',
      ]);
      expect(pod.spec?.dnsPolicy).toBe('None');
      expect(pod.spec?.dnsConfig).toEqual({ nameservers: ['1.1.1.1'], searches: ['ci.svc.cluster.local'], options: [{ name: 'ndots', value: '2' }] });
      expect(pod.spec?.securityContext).toEqual({ runAsNonRoot: true, sysctls: [{ name: 'net.ipv4.ip_local_port_range', value: '1024 65535' }] });
      for (const c of pod.spec?.containers ?? []) expect(c.securityContext?.capabilities).toEqual({ add: ['NET_ADMIN'], drop: ['ALL'] });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('refuses invalid images, volumes outside the allowlist and non-numeric users; ids differing in case get distinct names', () => {
    const plan = new PodPlan(build(), settings({ volumes: [{ source: '/cache', destination: '/cache', writable: false }] }));
    expect(() => plan.addContainer(emptyContainer({ id: 'a', image: 'UPPER/Case::bad' }))).toThrow(PlanError);
    expect(() => plan.addContainer(emptyContainer({ id: 'b', image: 'alpine', volumes: [{ source: '/etc', destination: '/etc', access_mode: '' }] }))).toThrow(
      /allowed volumes/,
    );
    expect(() => plan.addContainer(emptyContainer({ id: 'c', image: 'alpine', user: 'builder' }))).toThrow(/numeric uid/);
    plan.addContainer(emptyContainer({ id: 'x_y', image: 'alpine' }));
    expect(() => plan.addContainer(emptyContainer({ id: 'X_Y', image: 'alpine' }))).not.toThrow();
    const mounted = plan.addContainer(
      emptyContainer({ id: 'd', image: 'alpine', user: '1000:1000', volumes: [{ source: '/cache/go', destination: '/go', access_mode: 'rw' }] }),
    );
    const container = plan.toPod().spec?.containers.find((c) => c.name === mounted);
    expect(container?.securityContext).toMatchObject({ runAsUser: 1000, runAsGroup: 1000 });
    expect(container?.volumeMounts).toContainEqual({ name: 'host-0', mountPath: '/go', readOnly: true });
  });

  it('hides environment values when describing the pod', () => {
    const b = build();
    b.steps[0]!.environment.TOKEN = 'hunter2';
    const plan = new PodPlan(b, settings());
    for (const c of b.steps) plan.addContainer(c);
    expect(plan.describe()).not.toContain('hunter2');
    expect(plan.describe()).toContain('TOKEN');
  });
});

describe('pods template', () => {
  it('parses the custom resource as the API returns it', () => {
    const object = {
      apiVersion: 'go-vela.github.io/v1alpha1',
      kind: 'PipelinePodsTemplate',
      metadata: { name: 'ci', namespace: 'vela', resourceVersion: '12', uid: 'abc', managedFields: [{}] },
      spec: { template: { metadata: { labels: { a: 'b' } }, spec: { nodeSelector: { pool: 'ci' }, dnsPolicy: 'ClusterFirst' } } },
    };
    const template = parsePodsTemplate(object, 'PipelinePodsTemplate ci');
    expect(template.metadata.labels).toEqual({ a: 'b' });
    expect(template.metadata.annotations).toEqual({});
    expect(template.spec).toEqual({ nodeSelector: { pool: 'ci' }, dnsPolicy: 'ClusterFirst' });
  });

  it('accepts an empty template', () => {
    expect(parsePodsTemplateYaml('')).toEqual(emptyPodTemplate());
    expect(parsePodsTemplateYaml('apiVersion: go-vela.github.io/v1alpha1\nkind: PipelinePodsTemplate\nspec:\n  template: {}\n')).toEqual(emptyPodTemplate());
  });

  it.each([
    ['an unknown field', 'spec:\n  template:\n    spec:\n      nodeSelectr: {a: b}\n', /unknown field "nodeSelectr"/],
    ['a bad dnsPolicy', 'spec:\n  template:\n    spec:\n      dnsPolicy: Sometimes\n', /dnsPolicy must be one of/],
    ['a non-string label', 'spec:\n  template:\n    metadata:\n      labels: {a: 1}\n', /labels\.a must be a string/],
    ['another kind', 'kind: Pod\n', /kind must be PipelinePodsTemplate/],
    ['malformed YAML', 'spec: [\n', /not valid YAML/],
  ])('refuses %s', (_name, text, message) => {
    expect(() => parsePodsTemplateYaml(text)).toThrow(PodsTemplateError);
    expect(() => parsePodsTemplateYaml(text)).toThrow(message);
  });
});
