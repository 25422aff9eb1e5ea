'use strict';
// The shared secret: where it comes from (options.secret, PROCWIRE_SECRET)
// and the key file a named-channel server leaves next to its socket.

const crypto = require('crypto');
const fs = require('fs');
const { makeError, invalidArg } = require('../errors');

const MIN_SECRET_BYTES = 16;
// A key file is 64 hex characters; anything much larger is not one of ours,
// and reading it whole would let a hostile file make us allocate freely.
const MAX_SECRET_FILE_BYTES = 4096;

// A secret given as a string is used as its UTF-8 bytes, so both sides agree
// on the key whatever the text is (the hex text of a key file included).
function toSecretBuffer(value, what) {
  let buf;
  if (typeof value === 'string') buf = Buffer.from(value, 'utf8');
  else if (Buffer.isBuffer(value)) buf = Buffer.from(value);
  else if (value instanceof Uint8Array) buf = Buffer.from(value.buffer, value.byteOffset, value.byteLength);
  else throw invalidArg(`${what} must be a string or a Buffer`);
  // Short secrets can be guessed offline from one recorded handshake, so they
  // are refused rather than silently accepted.
  if (buf.length < MIN_SECRET_BYTES) {
    throw invalidArg(`${what} must be at least ${MIN_SECRET_BYTES} bytes long`);
  }
  return buf;
}

// resolveSecret(options, kind) -> Buffer | null. options.secret wins; the
// PROCWIRE_SECRET environment variable is the fallback (so a parent can hand
// the secret to children it spawns); null means no authentication was asked
// for. `kind` names the caller ('listen', 'connect', ...) in error messages.
function resolveSecret(options, kind) {
  const where = kind ? `${kind} options.secret` : 'options.secret';
  if (options !== undefined && options !== null && options.secret !== undefined && options.secret !== null) {
    return toSecretBuffer(options.secret, where);
  }
  const env = process.env.PROCWIRE_SECRET;
  if (typeof env === 'string' && env.length > 0) return toSecretBuffer(env, 'the PROCWIRE_SECRET environment variable');
  return null;
}

// ---- key files next to unix sockets ----------------------------------------

function validateSocketPath(socketPath) {
  if (typeof socketPath !== 'string' || socketPath.length === 0 || socketPath.includes('\0')) {
    throw invalidArg('socketPath must be a non-empty string without NUL');
  }
}

// secretFileFor(socketPath) -> the key file's path, next to the socket.
function secretFileFor(socketPath) {
  validateSocketPath(socketPath);
  return `${socketPath}.key`;
}

// createSecretFile(socketPath) -> the new secret (64 hex characters).
// The file is created exclusively: if anything already exists at the path (a
// symlink an attacker planted included), this throws EEXIST instead of
// writing through it. Remove a stale file with removeSecretFile() first.
function createSecretFile(socketPath) {
  const file = secretFileFor(socketPath);
  const secret = crypto.randomBytes(32).toString('hex');
  // 'wx' is O_CREAT | O_EXCL | O_WRONLY: the open fails on an existing path
  // and never follows a symlink.
  const fd = fs.openSync(file, 'wx', 0o600);
  try {
    // The umask may have stripped bits from 0600; set the mode exactly.
    fs.fchmodSync(fd, 0o600);
    fs.writeFileSync(fd, `${secret}\n`);
  } catch (err) {
    fs.closeSync(fd);
    try { fs.unlinkSync(file); } catch { /* already gone */ }
    throw err;
  }
  fs.closeSync(fd);
  return secret;
}

// readSecretFile(socketPath) -> the secret string. Refuses a file another
// user could have written or could read: it must be a regular file (not a
// symlink), owned by us, with no group or other permission bits.
function readSecretFile(socketPath) {
  const file = secretFileFor(socketPath);
  let fd;
  try {
    // O_NOFOLLOW refuses a symlink at open time (no check-then-open race);
    // O_NONBLOCK keeps a FIFO planted at the path from blocking the open.
    fd = fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK);
  } catch (err) {
    const why = err.code === 'ELOOP' ? 'it is a symbolic link' : `it cannot be opened (${err.code || err.message})`;
    throw makeError('ERR_PROCWIRE_AUTH_FAILED', `refusing key file ${file}: ${why}`, err);
  }
  try {
    // Checks are made on the open descriptor, so the file checked is the
    // file read even if the path is swapped meanwhile.
    const st = fs.fstatSync(fd);
    if (!st.isFile()) throw makeError('ERR_PROCWIRE_AUTH_FAILED', `refusing key file ${file}: not a regular file`);
    if (st.uid !== process.getuid()) {
      throw makeError('ERR_PROCWIRE_AUTH_FAILED',
        `refusing key file ${file}: owned by uid ${st.uid}, not by this process's uid ${process.getuid()}`);
    }
    if ((st.mode & 0o077) !== 0) {
      throw makeError('ERR_PROCWIRE_AUTH_FAILED',
        `refusing key file ${file}: mode ${(st.mode & 0o777).toString(8).padStart(4, '0')} lets other users ` +
        'read or write it; it must be 0600');
    }
    if (st.size > MAX_SECRET_FILE_BYTES) {
      throw makeError('ERR_PROCWIRE_AUTH_FAILED', `refusing key file ${file}: ${st.size} bytes is too large for a key`);
    }
    const secret = fs.readFileSync(fd, 'utf8').trim();
    if (Buffer.byteLength(secret) < MIN_SECRET_BYTES) {
      throw makeError('ERR_PROCWIRE_AUTH_FAILED', `refusing key file ${file}: the key is shorter than ${MIN_SECRET_BYTES} bytes`);
    }
    return secret;
  } finally {
    fs.closeSync(fd);
  }
}

// removeSecretFile(socketPath): removes the key file; a missing one is fine.
function removeSecretFile(socketPath) {
  const file = secretFileFor(socketPath);
  try {
    fs.unlinkSync(file);
  } catch (err) {
    if (err.code !== 'ENOENT') throw err;
  }
}

module.exports = {
  MIN_SECRET_BYTES, resolveSecret, secretFileFor, createSecretFile, readSecretFile, removeSecretFile,
};
