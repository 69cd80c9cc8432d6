/**
 * @berth/pipeline: Vela's pipeline model. Compiled-pipeline types and schemas, ids, rulesets,
 * scripts, and a compiler for Vela pipeline files.
 */
export * from './model.ts';
export * from './ids.ts';
export * from './glob.ts';
export * from './ruleset.ts';
export * from './eval.ts';
export * from './script.ts';
export * from './environment.ts';
export * from './image.ts';
export * from './substitute.ts';
export * from './compile.ts';
export * from './validate.ts';
