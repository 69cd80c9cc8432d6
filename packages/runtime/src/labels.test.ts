import { describe, expect, it } from 'vitest';
import { LABELS, labelValue, resourceLabels } from './labels.ts';

const VALID = /^(?:[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?)?$/;

describe('labelValue', () => {
  it('keeps a value that is already valid', () => {
    expect(labelValue('github_octocat_12')).toBe('github_octocat_12');
  });

  it('makes any value valid for Kubernetes and keeps long values distinct', () => {
    const long = `org_${'x'.repeat(80)}`;
    const values = ['a/b:c', '-leading', 'trailing.', long, `${long}1`, `${long}2`, 'ünïcode'];
    const labelled = values.map(labelValue);
    for (const value of labelled) expect(value).toMatch(VALID);
    expect(new Set(labelled.slice(3, 6)).size).toBe(3);
  });
});

describe('resourceLabels', () => {
  it('labels with worker and build, and the container when given', () => {
    expect(resourceLabels('worker-1', 'org_repo_1')).toEqual({ [LABELS.worker]: 'worker-1', [LABELS.build]: 'org_repo_1' });
    expect(resourceLabels('w', 'b', 'step_b_x')[LABELS.container]).toBe('step_b_x');
  });
});
