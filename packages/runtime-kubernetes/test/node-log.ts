/**
 * What the node holds of a container's log: the kubelet's pod log directory read straight from
 * disk (the test cluster's node is this machine). It is the truth a log follower is judged by —
 * what the container runtime wrote — independent of what the apiserver served.
 *
 * Layout (kubernetes/kubernetes pkg/kubelet/kuberuntime/helpers.go BuildContainerLogsDirectory and
 * buildContainerLogsPath): `/var/log/pods/<namespace>_<pod>_<uid>/<container>/<restartCount>.log`,
 * rotated files beside it as `<restartCount>.log.<time>[.gz]` (pkg/kubelet/logs/container_log_manager.go).
 * Each line is a CRI log record (staging cri-client pkg/logs/logs.go parseCRILog):
 * `<RFC3339Nano time> <stream> <tag> <content>`, the tag `P` for a part of a line (no newline
 * follows its content) and `F` for a line's end.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';

/** The kubelet's pod log directory (its podLogsDir default). */
const POD_LOGS = '/var/log/pods';

/** The directory of one container of a pod, or undefined when the node has none (yet, or any more). */
function containerDir(namespace: string, podName: string, containerName: string): string | undefined {
  if (!existsSync(POD_LOGS)) return undefined;
  const pod = readdirSync(POD_LOGS).find((name) => name.startsWith(`${namespace}_${podName}_`));
  if (pod === undefined) return undefined;
  const dir = `${POD_LOGS}/${pod}/${containerName}`;
  return existsSync(dir) ? dir : undefined;
}

/** A container instance's log as the node holds it now. */
export interface NodeLog {
  /** The content of the instance's current file, records joined (timestamps and tags removed). */
  content: Buffer;
  /** Rotated files of that instance beside it (their content is not in `content`). */
  rotated: number;
  /**
   * The content of the newest rotated file left uncompressed (the kubelet compresses all but the
   * newest: container_log_manager.go rotateLatestLog/compressLog), empty when there is none: the
   * log's end is there when the kubelet rotated after the last write.
   */
  lastRotated: Buffer;
}

/**
 * The log of the newest instance of `containerName` (its highest `<restartCount>.log`: in Berth's
 * pods, a step's instance follows the pause instance it replaced), or undefined if the node has none.
 */
export function nodeLog(namespace: string, podName: string, containerName: string): NodeLog | undefined {
  const dir = containerDir(namespace, podName, containerName);
  if (dir === undefined) return undefined;
  const files = readdirSync(dir);
  const current = files
    .map((file) => /^(\d+)\.log$/.exec(file))
    .filter((match) => match !== null)
    .map((match) => Number(match[1]))
    .sort((a, b) => b - a)[0];
  if (current === undefined) return undefined;
  const rotated = files.filter((file) => file.startsWith(`${current}.log.`));
  // Rotated names end with a sortable time (YYYYMMDD-hhmmss); the newest uncompressed one, if any.
  const newest = rotated
    .filter((file) => !file.endsWith('.gz'))
    .sort()
    .at(-1);
  return {
    content: criContent(readFileSync(`${dir}/${current}.log`)),
    rotated: rotated.length,
    lastRotated: newest === undefined ? Buffer.alloc(0) : criContent(readFileSync(`${dir}/${newest}`)),
  };
}

/** The content of CRI log records: each record's content, with a newline after the `F` ones. */
export function criContent(file: Buffer): Buffer {
  const out: Buffer[] = [];
  let start = 0;
  while (start < file.length) {
    let end = file.indexOf(10, start);
    if (end < 0) end = file.length; // a record still being written: taken as it is
    const record = file.subarray(start, end);
    start = end + 1;
    const first = record.indexOf(32);
    const second = record.indexOf(32, first + 1);
    const third = record.indexOf(32, second + 1);
    if (first < 0 || second < 0) continue;
    const tag = record.subarray(second + 1, third < 0 ? record.length : third).toString('latin1');
    out.push(third < 0 ? Buffer.alloc(0) : record.subarray(third + 1));
    if (!tag.split(':').includes('P')) out.push(Buffer.from('\n'));
  }
  return Buffer.concat(out);
}
