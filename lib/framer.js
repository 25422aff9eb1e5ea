'use strict';
// procwire.Framer: a byte stream in, whole decoded messages out, one native
// call per chunk.

const { binding } = require('./native');
const { codecFor } = require('./codec');
const { makeError } = require('./errors');
const {
  invalidArg, validateObject, validateSerialization, validateMaxMessageSize,
} = require('./validate');

class Framer {
  #native;
  #onError;
  #failed = null;

  // options: { serialization = 'advanced', maxMessageSize = 256 MiB, onError }
  // onError(err) receives each frame that failed to decode (the stream stays
  // in sync) and the fatal framing error, if any. Without it, push() throws
  // those errors after the chunk, with the chunk's good messages attached as
  // err.messages, so nothing is lost.
  constructor(options) {
    options = validateObject(options, 'options');
    const serialization = validateSerialization(options.serialization);
    const max = validateMaxMessageSize(options.maxMessageSize);
    if (options.onError !== undefined && typeof options.onError !== 'function') {
      throw invalidArg('options.onError must be a function');
    }
    this.#onError = options.onError;
    this.#native = new binding.NativeFramer(codecFor(serialization).id, max);
    this.serialization = serialization;
    this.maxMessageSize = max;
  }

  push(chunk) {
    if (!ArrayBuffer.isView(chunk)) throw invalidArg('chunk must be a Buffer, TypedArray or DataView');
    if (this.#failed !== null) throw this.#failed;
    const [messages, errors, fatal] = this.#native.push(chunk);
    if (errors === undefined && fatal === undefined) return messages;
    const problems = [];
    if (errors !== undefined) {
      for (let i = 1; i < errors.length; i += 2) problems.push(errors[i]);
    }
    if (fatal !== undefined) {
      this.#failed = fatal;
      problems.push(fatal);
    }
    if (this.#onError !== undefined) {
      for (const err of problems) this.#onError(err);
      return messages;
    }
    const err = problems.length === 1 ? problems[0]
      : makeError('ERR_PROCWIRE_DECODE', `${problems.length} frames failed`, new AggregateError(problems));
    err.messages = messages;
    throw err;
  }

  // Bytes held for a frame that spans chunks.
  get buffering() {
    return this.#native.buffering();
  }
}

module.exports = { Framer };
