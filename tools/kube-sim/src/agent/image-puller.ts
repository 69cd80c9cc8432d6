// The node's image puller and the per-pod start lock: the two places where the kubelet does
// one thing at a time.
//
// - Pulls are serialised per node: the kubelet's default `serializeImagePulls: true` gives every
//   pod one shared serialImagePuller (kubernetes/kubernetes pkg/kubelet/images/puller.go
//   newSerialImagePuller / serialImagePuller.pullImage; chosen in
//   pkg/kubelet/images/image_manager.go NewImageManager).
// - Containers of a pod are started one after another within a sync: SyncPod loops over
//   podContainerChanges.ContainersToStart calling start(...) for each
//   (pkg/kubelet/kuberuntime/kuberuntime_manager.go SyncPod), and each start pulls the image
//   first (pkg/kubelet/kuberuntime/kuberuntime_container.go startContainer → EnsureImageExists).

/** Runs async sections one at a time, in the order they asked (FIFO). */
export class SerialQueue {
  #tail: Promise<void> = Promise.resolve();
  readonly #serial: boolean;

  /** `serial: false` runs every section at once (the lenient, parallel mode). */
  constructor(serial = true) {
    this.#serial = serial;
  }

  /** Runs `section` after every section queued before it has finished. */
  async run<T>(section: () => Promise<T>): Promise<T> {
    if (!this.#serial) return section();
    const previous = this.#tail;
    let release: () => void = () => undefined;
    this.#tail = new Promise<void>((resolve) => (release = resolve));
    try {
      await previous;
      return await section();
    } finally {
      release();
    }
  }
}

/** The node's images: which slow-pull images were pulled already, and the serial pull queue. */
export class ImagePuller {
  readonly queue: SerialQueue;
  readonly #pulled = new Set<string>();

  constructor(serial: boolean) {
    this.queue = new SerialQueue(serial);
  }

  /** True once `image` (as written in a spec) was pulled on this node. */
  pulled(image: string): boolean {
    return this.#pulled.has(image);
  }

  /** Records a successful pull of `image`. */
  markPulled(image: string): void {
    this.#pulled.add(image);
  }
}
