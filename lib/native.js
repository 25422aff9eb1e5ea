'use strict';
// Loads the addon once per realm and hands it the real Buffer constructor
// (captured here, before user code can swap it) and the coded-error factory.

const { Buffer } = require('buffer');
const path = require('path');
const { makeError } = require('./errors');

function load() {
  const candidates = [
    process.env.PROCWIRE_ADDON,
    path.join(__dirname, '..', 'build', 'Release', 'procwire.node'),
    path.join(__dirname, '..', 'build', 'Debug', 'procwire.node'),
  ].filter(Boolean);
  let lastError;
  for (const file of candidates) {
    try {
      return require(file);
    } catch (err) {
      // An addon named explicitly must load; its error is the one to show.
      if (file === process.env.PROCWIRE_ADDON) {
        throw makeError('ERR_PROCWIRE_NATIVE_UNAVAILABLE',
          `PROCWIRE_ADDON=${file} could not be loaded: ${err.message}`, err);
      }
      lastError = lastError || err;
    }
  }
  throw makeError('ERR_PROCWIRE_NATIVE_UNAVAILABLE',
    `procwire's native addon could not be loaded (${lastError && lastError.message}); run \`npm run build\``,
    lastError);
}

const binding = load();
binding.setup(Buffer, makeError);

const FORMAT = { advanced: 0, json: 1 };

module.exports = { binding, FORMAT };
