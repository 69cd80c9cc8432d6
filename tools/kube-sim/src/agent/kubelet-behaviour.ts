// How faithfully the fake kubelet behaves, and its image-pull back-off.

/** Back-off of failed image pulls (the kubelet's is 10 s doubling to 5 min). */
export interface PullBackoff {
  initialMs: number;
  maxMs: number;
}

/**
 * How faithfully the fake kubelet behaves. The defaults are the kubelet's; every `true` among the
 * lenient knobs restores a convenience kube-sim had before it modelled the rule.
 */
export interface KubeletBehaviour {
  /** Lenient: retry a failed image switch even under restartPolicy Never (rule 1 off). */
  retryFailedImageSwitch: boolean;
  /** Lenient: start a pod's containers all at once instead of one after another (rule 4 off). */
  parallelStarts: boolean;
  /** Lenient: kill the running containers that image patches replaced all at once instead of one sync after another (rule 8 off). */
  parallelPatchKills: boolean;
  /** The kubelet's `serializeImagePulls` (default true: one pull at a time per node). */
  serializeImagePulls: boolean;
  /** PLEG relist period: container starts and exits reach the pod status on this tick; 0 publishes every change at once (rule 5 off). */
  statusRelistMs: number;
  /** Lenient: status.image is the spec's reference fully qualified, imageID the image id (rule 3 off). */
  specImageNames: boolean;
  /**
   * Rule 10: a spec change (image patch) waits, as the kubelet's pod worker does, for the first
   * PLEG relist that starts after the pod's last sync ended. Opt-in (false here): the kubelet
   * always waits, but it costs about 1 s per step swap across every test that runs steps.
   */
  syncWaitsForRelist: boolean;
}

/** The kubelet's behaviour: every rule on, relist every second. */
export const faithfulKubelet: KubeletBehaviour = {
  retryFailedImageSwitch: false,
  parallelStarts: false,
  parallelPatchKills: false,
  serializeImagePulls: true,
  statusRelistMs: 1000,
  specImageNames: false,
  syncWaitsForRelist: true,
};
