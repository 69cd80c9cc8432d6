import { describe, expect, it, vi } from 'vitest';
import { CONTRACT_VERSION, contractMismatch, defineRuntime, hasCapability, type RuntimeDescriptor } from './descriptor.ts';

const create: RuntimeDescriptor['create'] = () => Promise.reject(new Error('not used'));

describe('defineRuntime', () => {
  it('accepts a plugin written for this contract major without a warning', () => {
    const warn = vi.fn();
    const descriptor = defineRuntime({ name: 'fake', version: '0.1.0', contract: CONTRACT_VERSION, create }, warn);
    expect(descriptor.name).toBe('fake');
    expect(Object.isFrozen(descriptor)).toBe(true);
    expect(warn).not.toHaveBeenCalled();
  });

  it('warns, naming the plugin and both versions, when the contract major differs', () => {
    const warn = vi.fn();
    defineRuntime({ name: 'old-plugin', version: '3.2.1', contract: '0.9.0', create }, warn);
    expect(warn).toHaveBeenCalledTimes(1);
    expect(warn.mock.calls[0]?.[0]).toMatch(
      /runtime plugin "old-plugin" 3\.2\.1 was written for Runtime contract 0\.9\.0, but this @berth\/runtime speaks contract 1\.x \(it defines 1\.\d+\.\d+\)\. Use a release of the plugin made for contract 1\.x/,
    );
  });

  it('warns through process.emitWarning with a code by default', () => {
    const emit = vi.spyOn(process, 'emitWarning').mockImplementation(() => undefined);
    try {
      defineRuntime({ name: 'future', version: '1.0.0', contract: '2.0.0', create });
      expect(emit).toHaveBeenCalledWith(expect.stringContaining('"future"'), { code: 'BERTH_RUNTIME_CONTRACT' });
    } finally {
      emit.mockRestore();
    }
  });

  it('contractMismatch accepts the same major and explains any other', () => {
    expect(contractMismatch({ name: 'x', version: '1.0.0', contract: `${CONTRACT_VERSION.split('.')[0]}.99.0` })).toBeUndefined();
    expect(contractMismatch({ name: 'x', version: '1.0.0', contract: '99.0.0' })).toMatch(
      /"x" 1\.0\.0 was written for Runtime contract 99\.0\.0.*or a Berth whose contract is 99\.x/,
    );
    expect(contractMismatch({ name: 'x', version: '1.0.0', contract: 'latest' })).toMatch(/declares contract "latest", which is not a version/);
  });

  it('refuses a name users could not type and a contract that is not a version', () => {
    expect(() => defineRuntime({ name: 'My Runtime', version: '1.0.0', contract: '1.0.0', create })).toThrow(/lower-case letters/);
    expect(() => defineRuntime({ name: 'ok', version: '1.0.0', contract: 'latest', create })).toThrow(/not a version/);
  });

  it('keeps the optional capabilities a plugin declares, and refuses one the contract does not define', () => {
    const descriptor = defineRuntime({ name: 'caps', version: '1.0.0', contract: CONTRACT_VERSION, capabilities: ['hostWorkspace'], create });
    expect(hasCapability(descriptor, 'hostWorkspace')).toBe(true);
    expect(hasCapability(descriptor, 'outputs')).toBe(false);
    expect(hasCapability(defineRuntime({ name: 'none', version: '1.0.0', contract: CONTRACT_VERSION, create }), 'outputs')).toBe(false);
    expect(() => defineRuntime({ name: 'typo', version: '1.0.0', contract: CONTRACT_VERSION, capabilities: ['output' as 'outputs'], create })).toThrow(
      /declares capability "output", which contract 1\.\d+\.\d+ does not define; known: outputs, hostWorkspace/,
    );
  });
});
