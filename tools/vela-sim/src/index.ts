/**
 * @berth/vela-sim: a test double of go-vela/server's worker-facing API on 127.0.0.1, with the
 * server's side of the Redis queue (Ed25519-signed RPUSH), HS256 tokens, a call log and fault
 * injection. For tests only; see README.md.
 */
export { VelaSim } from './sim.ts';
export { type VelaSimOptions } from './context.ts';
export { type CallRecord } from './http.ts';
export { ITEM_VERSION, type EnqueueBuildOptions, type EnqueuedBuild } from './queue.ts';
export { type InstallTokenRecord } from './state.ts';
export { type FaultKind, type FaultRule, compilePathPattern } from './faults.ts';
export { type TokenClaims, type TokenType, mintJwt, verifyJwt } from './jwt.ts';
export { type QueueKeys, generateQueueKeys, openCombined, queueKeysFromPrivate, signCombined } from './signing.ts';
export type * from './types.ts';
