/** Which code `berth` runs, and why (for `berth --build-info`). */
export interface Entry {
  mode: 'compiled' | 'source';
  /** The module to import: dist/bundle/main.js or src/main.ts. */
  main: string;
  reason: string;
}

/** Chooses compiled (dist/bundle/, fresh) or source; see entry.js. */
export function chooseEntry(options: { appDir: string; inWorkspace: boolean; env: Record<string, string | undefined> }): Entry;

/** The app's folder and those of the workspace packages it depends on, directly or not. */
export function workspacePackages(appDir: string): string[];

/** Marks dist/ as completely built (the build script's last step). */
export function writeBuildStamp(appDir: string): void;
