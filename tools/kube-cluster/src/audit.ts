/**
 * Reads the real apiserver's audit log (`/var/lib/berth-kube/logs/audit.log`, JSON lines, Metadata
 * level, only the requests of user `berth`: see cluster.sh's audit policy). This is how the benches
 * count API requests on the real cluster, as kube-sim's counters do on the double.
 */
import { readFileSync } from 'node:fs';

/** The fields of one audit event that Berth's benches read (audit.k8s.io/v1 Event, Metadata level). */
export interface AuditEvent {
  /** One id per request; a watch logs it twice (`ResponseStarted`, then `ResponseComplete`). */
  auditID: string;
  stage: string;
  verb: string;
  requestURI: string;
  user: { username: string };
  userAgent?: string;
  objectRef?: { resource?: string; subresource?: string; namespace?: string; name?: string };
  responseStatus?: { code?: number };
  /** When the apiserver received the request (RFC 3339, microseconds), on this machine's clock. */
  requestReceivedTimestamp: string;
  /** {@link requestReceivedTimestamp} in ms since the epoch (added by {@link readAudit}). */
  receivedMs: number;
}

/**
 * The requests in the audit log at `path` received at or after `since` (ms since the epoch) and, when
 * given, before `until`: one event per request (the first stage logged, `ResponseStarted` for a watch
 * still open), in the log's order. Lines that are not JSON (a partly written last line) are skipped.
 */
export function readAudit(path: string, since: number, until = Infinity): AuditEvent[] {
  const seen = new Set<string>();
  const events: AuditEvent[] = [];
  for (const line of readFileSync(path, 'utf8').split('\n')) {
    if (line === '') continue;
    let event: AuditEvent;
    try {
      event = JSON.parse(line) as AuditEvent;
    } catch {
      continue;
    }
    if (seen.has(event.auditID)) continue;
    seen.add(event.auditID);
    event.receivedMs = Date.parse(event.requestReceivedTimestamp);
    if (event.receivedMs >= since && event.receivedMs < until) events.push(event);
  }
  return events;
}
