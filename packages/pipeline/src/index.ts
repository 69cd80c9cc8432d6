/**
 * @berth/pipeline: Vela's pipeline model. Compiled-pipeline types and schemas, ids, rulesets,
 * scripts, and a compiler for Vela pipeline files.
 */
export * from './model.ts';
