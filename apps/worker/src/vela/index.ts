/**
 * The Vela worker protocol, as a library `berth start` composes: the server API client, the
 * Redis queue, worker credentials and check-in, the Vela reporter, and the configuration.
 */
export { VelaApiError, type VelaApiErrorKind, VelaClient, type VelaClientOptions, type CallOptions, type RetryOptions, isVelaStatus } from './client.ts';
export {
  SUPPORTED_ITEM_VERSION,
  VelaQueue,
  type VelaQueueOptions,
  type PopResult,
  type QueueItem,
  type RawEntry,
  type UnverifiedBuild,
  decodeEntry,
  openSigned,
  queuePublicKey,
} from './queue.ts';
export {
  EXPIRY_MARGIN_SEC,
  WorkerCredentials,
  checkIn,
  checkRegistrationToken,
  decodeJwt,
  isTokenExpired,
  nextCheckInDelayMs,
  type CheckInResult,
  type RegisterResponse,
  type TokenClaims,
} from './auth.ts';
export { type ClaimResult, claimBuild } from './claim.ts';
export { VelaReporter, type VelaReporterOptions, type ReportedBuild } from './reporter.ts';
export { WholeLogUploader, type WholeLogUploaderOptions, type UploadStats } from './log-upload.ts';
export { ConfigError, type ConfigIssue, type ConfigSources, SETTINGS, type StartConfig, loadStartConfig, parseGoDuration } from './config.ts';
export type * from './models.ts';
