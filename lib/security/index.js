'use strict';
// Shared-secret authentication: the hello (handshake.js, a mutual
// HMAC-SHA256 challenge/response run over a freshly opened Channel before
// it is handed to the application) and the secret's sources and key files
// (keyfile.js).

const { authenticate, helloWire } = require('./handshake');
const { resolveSecret, secretFileFor, createSecretFile, readSecretFile, removeSecretFile } = require('./keyfile');

module.exports = {
  authenticate,
  resolveSecret,
  secretFileFor,
  createSecretFile,
  readSecretFile,
  removeSecretFile,
  // Exposed for tests, not as public API.
  helloWire,
};
