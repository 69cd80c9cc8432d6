// Stand-in for a module loaded on first use (see bin/lazy-deps.js): forwards every call of the
// module's one exported function to the real module, loaded then.
'use strict';
/* eslint-disable @typescript-eslint/no-require-imports -- a CommonJS stand-in: require is the point */
const { fileURLToPath } = require('node:url');

let real;
module.exports = function lazy(...args) {
  real ??= require(fileURLToPath(globalThis[Symbol.for('berth.lazy-deps')].get('docker-modem-ssh')));
  return real.apply(this, args);
};
