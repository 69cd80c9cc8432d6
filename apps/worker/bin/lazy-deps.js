// Parts of the Docker client that Berth's paths never use are loaded on first use instead of at
// start-up: dockerode's BuildKit session (`./session`: @grpc/grpc-js, @grpc/proto-loader,
// protobufjs; only docker.buildImage with BuildKit calls it) and docker-modem's SSH transport
// (`./ssh`: ssh2; only for ssh:// engine addresses, which the Docker runtime does not accept).
// Together ~10 MB of RSS and ~100 ms of start-up for every `berth exec` and `berth start`.
//
// Each of the two modules exports one function; a resolve hook hands the requiring module a
// stand-in (bin/lazy/*.js) that loads the real module when the function is first called.
// Should a client update rename or reshape them, the hook simply matches nothing.
import { registerHooks } from 'node:module';

/**
 * The modules loaded on first use, here and in the bundle (bin/bundle.js): the requiring file (its
 * path's end), what it requires, the stand-in's name (bin/lazy/*.js), and for the bundle the
 * installed chain of packages that leads to the real module and its file in the last of them.
 */
export const LAZY_MODULES = [
  {
    parent: '/dockerode/lib/docker.js',
    specifier: './session',
    name: 'dockerode-session',
    from: ['@berth/runtime-docker', 'dockerode'],
    file: 'lib/session.js',
  },
  {
    parent: '/docker-modem/lib/modem.js',
    specifier: './ssh',
    name: 'docker-modem-ssh',
    from: ['@berth/runtime-docker', 'dockerode', 'docker-modem'],
    file: 'lib/ssh.js',
  },
];

/** Where a stand-in finds the real module: name → resolved URL (read by bin/lazy/*.js). */
const REAL = Symbol.for('berth.lazy-deps');

/** Installs the resolve hook (once per process). */
export function loadDockerExtrasLazily() {
  if (globalThis[REAL]) return;
  const real = (globalThis[REAL] = new Map());
  registerHooks({
    resolve(specifier, context, nextResolve) {
      const lazy = LAZY_MODULES.find((l) => l.specifier === specifier && context.parentURL?.endsWith(l.parent));
      if (!lazy) return nextResolve(specifier, context);
      real.set(lazy.name, nextResolve(specifier, context).url);
      return { url: new URL(`./lazy/${lazy.name}.js`, import.meta.url).href, format: 'commonjs', shortCircuit: true };
    },
  });
}
