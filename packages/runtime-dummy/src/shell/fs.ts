import path from 'node:path/posix';

/** A tiny in-memory file system: files and directories by absolute path. */
export class MemoryFs {
  readonly files = new Map<string, Buffer>();
  readonly dirs = new Set<string>(['/']);

  read(file: string): Buffer | undefined {
    return this.files.get(file);
  }
  write(file: string, data: Buffer, append: boolean): void {
    const before = append ? this.files.get(file) : undefined;
    this.files.set(file, before ? Buffer.concat([before, data]) : data);
    this.mkdir(path.dirname(file));
  }
  mkdir(dir: string): void {
    for (let d = dir; !this.dirs.has(d); d = path.dirname(d)) this.dirs.add(d);
  }
  remove(target: string): boolean {
    let removed = this.files.delete(target);
    for (const key of [...this.files.keys()]) if (key.startsWith(`${target}/`)) removed = this.files.delete(key) || removed;
    for (const dir of [...this.dirs]) if (dir === target || dir.startsWith(`${target}/`)) removed = this.dirs.delete(dir) || removed;
    return removed;
  }
  isDir(dir: string): boolean {
    return this.dirs.has(dir);
  }
}

/**
 * A container's view of files: its own file system, with the build's workspace mounted at
 * `mountPath` (when the build has one), the build's outputs directory at `outputs.path` (when it
 * has one; it may lie inside the workspace, as `/vela/outputs` does) and a few virtual files
 * (`/proc/self/status`, `/dev/null`).
 */
export class ContainerFs {
  readonly #own: MemoryFs;
  readonly #workspace: MemoryFs | undefined;
  readonly #mountPath: string;
  readonly #virtual: (file: string) => Buffer | undefined;
  readonly #outputs: { path: string; fs: MemoryFs } | undefined;

  constructor(
    own: MemoryFs,
    workspace: MemoryFs | undefined,
    mountPath: string,
    virtual: (file: string) => Buffer | undefined,
    outputs?: { path: string; fs: MemoryFs },
  ) {
    this.#own = own;
    this.#workspace = workspace;
    this.#mountPath = mountPath;
    this.#virtual = virtual;
    this.#outputs = outputs;
  }

  #route(file: string): MemoryFs {
    if (this.#outputs && (file === this.#outputs.path || file.startsWith(`${this.#outputs.path}/`))) return this.#outputs.fs;
    if (this.#workspace && (file === this.#mountPath || file.startsWith(`${this.#mountPath}/`))) return this.#workspace;
    return this.#own;
  }

  read(file: string): Buffer | undefined {
    return this.#virtual(file) ?? this.#route(file).read(file);
  }
  write(file: string, data: Buffer, append: boolean): void {
    this.#route(file).write(file, data, append);
  }
  mkdir(dir: string): void {
    this.#route(dir).mkdir(dir);
  }
  remove(target: string): boolean {
    return this.#route(target).remove(target);
  }
  exists(file: string): boolean {
    return this.read(file) !== undefined || this.isDir(file);
  }
  isDir(dir: string): boolean {
    if (dir === this.#mountPath && this.#workspace) return true;
    if (dir === this.#outputs?.path) return true;
    return this.#route(dir).isDir(dir) || ['/', '/bin', '/tmp', '/proc', '/dev', '/etc', '/root'].includes(dir);
  }
}
