'use strict';
// Why a stream ended: the first argument of a handle's onend callback
// (lib/transport/contract.js). The native channel's names come from
// src/core/end_reason.h (binding.endReasons, in that order;
// test/layout.test.js checks that the two agree). A module of its own with
// no dependencies, so every backend can use it without an import cycle.

const END_REASONS = Object.freeze({
  END_OF_STREAM: 'endOfStream',
  SYSTEM_ERROR: 'systemError',
  MESSAGE_TOO_LARGE: 'messageTooLarge',
  SEGMENT_PROTOCOL: 'segmentProtocol',
  TRUNCATED: 'truncated',
  RING_CORRUPT: 'ringCorrupt',
  OUT_OF_MEMORY: 'outOfMemory',
});

module.exports = { END_REASONS };
