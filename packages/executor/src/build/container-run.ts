/** What the executor knows about one container of its build, and the build copy it works on. */
import type { Build, Container } from '@berth/pipeline';
import type { LogWriter } from '../log/log-writer.ts';
import type { Outputs } from '../outputs/outputs.ts';
import type { StepReport, Target, TargetKind } from '../reporter.ts';
import type { Status } from '../status.ts';
import { deferred } from './contexts.ts';

/** What the executor knows about one container of the build (or the init step). */
export class ContainerRun {
  readonly kind: TargetKind;
  readonly container: Container;
  readonly stage: string | undefined;
  status: Status = 'pending';
  exitCode = 0;
  started: number | undefined;
  finished: number | undefined;
  error: string | undefined;
  /**
   * How far its container is set up: `created` once setupContainer resolved; `held` once it was
   * started held ahead of its step (the runtime's `heldStart`, build/steps.ts setUpAhead) and until
   * execStep releases it instead of running it (then `created`); `none` again once removed.
   */
  setup: 'none' | 'created' | 'held' = 'none';
  /**
   * The runtime was asked to set its container up (setupContainer, holdContainer) and it was not
   * removed since: a container may exist even when that setup failed or its caller gave up (an
   * engine finishes a create it received; a hold may fail after its create). Destroy removes it.
   */
  setupAsked = false;
  /** runContainer resolved: a container exists that must be removed. */
  ran = false;
  /** waitContainer resolved: the container has ended. */
  exited = false;
  /** A stream request was sent; `streamDone` settles when its stream ended. */
  streaming = false;
  readonly streamDone = deferred();
  writer: LogWriter | undefined;
  /** Lines for the head of this container's log (secrets withheld from it, and why). */
  readonly notes: string[] = [];
  /** With outputs: the step as compiled, before its environment was prepared (it is prepared again with the outputs). */
  template: Container | undefined;
  /** With outputs: its image needs an output, so it is set up only when it starts. */
  deferred = false;
  /**
   * With outputs: the outputs its environment was prepared with. Its container, set up before the
   * step is reached (in assembleBuild, or ahead), is kept only if the outputs are the same then.
   */
  outputsSeen: Outputs | undefined;
  /**
   * Set up when the build reaches it, not in assembleBuild (a runtime with `setupWhileRunning`):
   * ahead of the build reaching it (`prefetch`), or just before it runs when it takes a lazy secret.
   */
  late = false;
  /** May be set up ahead of the build reaching it: late, and its environment is complete before planStep. */
  prefetch = false;
  /** The late setup under way or done; settles once setupContainer (or holdContainer) did (`setup` is then set). */
  creating: Promise<void> | undefined;
  /** Gives back the place its held start took in its chain (released, removed, or not held after all). Idempotent. */
  unhold: (() => void) | undefined;

  constructor(kind: TargetKind, container: Container, stage?: string) {
    this.kind = kind;
    this.container = container;
    this.stage = stage;
  }

  get target(): Target {
    const c = this.container;
    return { kind: this.kind, name: c.name, number: c.number, id: c.id, image: c.image, ...(this.stage === undefined ? {} : { stage: this.stage }) };
  }

  report(): StepReport {
    return {
      ...this.target,
      status: this.status,
      exitCode: this.exitCode,
      ...(this.started === undefined ? {} : { started: this.started }),
      ...(this.finished === undefined ? {} : { finished: this.finished }),
      ...(this.error === undefined ? {} : { error: this.error }),
      detached: this.kind === 'service' || this.container.detach,
      continueOnFailure: this.container.ruleset.continue,
    };
  }
}

/** A copy of the build the executor may change (environment, exit codes), without stage promises. */
export function copyBuild(build: Build): Build {
  const stages = build.stages.map(({ done: _done, ...stage }) => stage);
  return structuredClone({ ...build, stages });
}
