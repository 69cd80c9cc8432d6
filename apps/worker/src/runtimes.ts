import { dockerRuntime } from '@berth/runtime-docker';
import type { RuntimeDescriptor } from '@berth/runtime';
import { CommandError } from './exit-codes.ts';

/** The runtimes the worker knows. Only the worker app knows which plugins exist. */
export type RuntimeChoice = 'docker' | 'kubernetes';

/** The descriptor of the chosen runtime plugin. */
export function selectRuntime(choice: RuntimeChoice, options: { kubeconfig?: string | undefined; namespace?: string | undefined }): RuntimeDescriptor {
  switch (choice) {
    case 'docker':
      return dockerRuntime();
    case 'kubernetes':
      void options;
      throw new CommandError('--runtime kubernetes is not available in this build of berth yet');
  }
}
