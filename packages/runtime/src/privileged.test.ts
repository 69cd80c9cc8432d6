import { describe, expect, it } from 'vitest';
import { isPrivilegedImage } from './privileged.ts';

describe('isPrivilegedImage (Vela FamiliarMatch semantics)', () => {
  it.each([
    ['target/vela-docker', ['target/vela-docker'], true],
    ['target/vela-docker:v1.2.3', ['target/vela-docker'], true],
    ['docker.io/target/vela-docker:latest', ['target/vela-docker'], true],
    ['target/vela-docker:v1', ['target/vela-docker:v1'], true],
    ['target/vela-docker:v2', ['target/vela-docker:v1'], false],
    ['target/vela-git', ['target/*'], true],
    ['alpine', ['alpine'], true],
    ['alpine:3.20', ['alpine:latest'], false],
    ['ghcr.io/acme/builder:1', ['ghcr.io/acme/*'], true],
    ['acme/builder', ['ghcr.io/acme/*'], false],
    ['target/vela-docker-evil', ['target/vela-docker'], false],
    ['alpine', [], false],
    ['NOT A REFERENCE', ['*'], false],
    ['alpine', ['[unclosed'], false],
  ])('%s with %j → %s', (image, patterns, expected) => {
    expect(isPrivilegedImage(image, patterns)).toBe(expected);
  });

  it('allows nothing without an allowlist', () => {
    expect(isPrivilegedImage('docker:dind', undefined)).toBe(false);
  });
});
