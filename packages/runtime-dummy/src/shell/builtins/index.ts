/**
 * Every command of the dummy's shell, by name, gathered from the builtin groups.
 */
import type { Builtin } from '../shell.ts';
import { CONTROL_BUILTINS } from './control.ts';
import { FILE_BUILTINS } from './files.ts';
import { NETWORK_BUILTINS } from './network.ts';
import { SYSTEM_BUILTINS } from './system.ts';
import { TEXT_BUILTINS } from './text.ts';

const BUILTINS = new Map<string, Builtin>([...CONTROL_BUILTINS, ...TEXT_BUILTINS, ...FILE_BUILTINS, ...SYSTEM_BUILTINS, ...NETWORK_BUILTINS]);

/** The command called `name`, if the shell knows it. */
export function findBuiltin(name: string): Builtin | undefined {
  return BUILTINS.get(name);
}

/** Names of the commands the dummy's shell knows. */
export function shellCommands(): string[] {
  return [...BUILTINS.keys()].sort();
}
