/**
 * @berth/pipeline: Vela's pipeline model. Compiled-pipeline types and schemas, ids, rulesets,
 * scripts, and a compiler for Vela pipeline files.
 *
 * The entry point exports what the worker, the executor and runtime plugins use; the rest of the
 * package (key tables, YAML helpers, id patterns, …) is internal.
 */
export type { Build, Container, PullPolicy, Rules, Ruleset, Secret, Stage, Ulimit, Volume } from './model.ts';
export { emptyBuild, emptyContainer, emptyRuleset, marshalBuild, parseBuild, parseContainer } from './model.ts';
export { validateBuild } from './validate.ts';
export { allContainers, prepareBuild, sanitizeContainerId, sanitizeKubernetesName, type BuildIdentity } from './ids.ts';
export { filepathMatch } from './glob.ts';
export { evaluateRuleset, matchRuleset, shouldExecute, RulesetError, type RuleData } from './ruleset.ts';
export { parseEval, evaluateEval } from './eval.ts';
export { applyScript } from './script.ts';
export { buildEnvironment, repoEnvironment, velaEnvironment, WORKSPACE_DEFAULT, type EnvironmentInput } from './environment.ts';
export { parseImageReference, type ImageReference, type ImageReferenceResult } from './image.ts';
export { envsubst, SubstitutionError } from './substitute.ts';
export { skipEmptyBuild } from './skip.ts';
export { compilePipeline, type CompileOptions, type CompileResult } from './compile/pipeline.ts';
export {
  DEFAULT_TEMPLATE_DEPTH,
  parseTemplateSource,
  type RemoteTemplateSource,
  type TemplateLoad,
  type TemplateLoader,
  type TemplateReference,
} from './compile/templates.ts';
export type { CompileError } from './compile/document.ts';
