// Log records as Docker serves them (multiplexed frames of `<timestamp> <content>`) and as the
// kubelet's container runtime writes them to a container's log file (the CRI log format).

/** Normalises a Docker timestamp to RFC3339 with exactly nine fractional digits (the kubelet's format). */
function fixedNano(ts: string): string {
  const m = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?Z$/.exec(ts);
  if (!m) return ts;
  return `${m[1]}.${(m[2] ?? '').padEnd(9, '0').slice(0, 9)}Z`;
}

/** A date as a fixed-width RFC3339Nano timestamp (comparable as a string with fixedNano's). */
export function fromDate(date: Date): string {
  return fixedNano(date.toISOString());
}

/** Splits Docker's multiplexed (non-TTY) log stream into frames. */
export class FrameParser {
  #buffer: Buffer = Buffer.alloc(0);

  /** Adds bytes; returns the complete frames' payloads. */
  push(chunk: Buffer): Buffer[] {
    this.#buffer = this.#buffer.length === 0 ? chunk : Buffer.concat([this.#buffer, chunk]);
    const frames: Buffer[] = [];
    while (this.#buffer.length >= 8) {
      const size = this.#buffer.readUInt32BE(4);
      if (this.#buffer.length < 8 + size) break;
      frames.push(this.#buffer.subarray(8, 8 + size));
      this.#buffer = this.#buffer.subarray(8 + size);
    }
    return frames;
  }
}

/** A frame's payload split into its fixed-width timestamp and its content (with the newline, if any). */
export function splitRecord(payload: Buffer): { ts: string; content: Buffer } {
  const space = payload.indexOf(0x20);
  const ts = fixedNano(payload.subarray(0, space >= 0 ? space : payload.length).toString('latin1'));
  return { ts, content: space >= 0 ? payload.subarray(space + 1) : Buffer.alloc(0) };
}

/**
 * Bytes one record takes in the container's log file, in the CRI log format the runtime writes:
 * `<RFC3339Nano timestamp> <stdout|stderr> <F|P> <content>\n` (containerd internal/cri/io/logger.go
 * redirectLogs; parsed back by kubernetes/kubernetes staging cri-client pkg/logs/logs.go
 * parseCRILog). A line Docker split (no newline) is a partial `P` record ended by a newline too.
 */
export function criRecordBytes(content: Buffer): number {
  const newline = content.length > 0 && content[content.length - 1] === 0x0a ? 0 : 1;
  return 30 + ' stdout F '.length + content.length + newline;
}
