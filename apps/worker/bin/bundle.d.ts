/** Bundles the compiled worker (or `input`) into dist/bundle/ (or `outDir`); see bundle.js. */
export function bundle(options?: { input?: string; outDir?: string }): Promise<void>;
