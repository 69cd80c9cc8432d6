/**
 * @berth/vela-sim: a test double of go-vela/server's worker-facing API on 127.0.0.1, with the
 * server's side of the Redis queue (Ed25519-signed RPUSH), HS256 tokens, a call log and fault
 * injection. For tests only; see README.md.
 */
export { ITEM_VERSION, VelaSim, type CallRecord, type EnqueueBuildOptions, type EnqueuedBuild, type InstallTokenRecord, type VelaSimOptions } from './sim.ts';
export { type FaultKind, type FaultRule, compilePathPattern } from './faults.ts';
export { type TokenClaims, type TokenType, mintJwt, verifyJwt } from './jwt.ts';
export { type QueueKeys, generateQueueKeys, openCombined, queueKeysFromPrivate, signCombined } from './signing.ts';
export type * from './types.ts';
