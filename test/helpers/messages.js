'use strict';
// Waiting for a channel's messages in tests.

const { withTimeout } = require('./wait');

// The next message on `channel` that satisfies `predicate` (any message by
// default); rejects with the channel's error, or one naming the close
// reason, if the channel closes first.
function nextMessage(channel, predicate = () => true) {
  return new Promise((resolve, reject) => {
    const onMessage = (m) => {
      if (!predicate(m)) return;
      channel.off('message', onMessage);
      channel.off('close', onClose);
      resolve(m);
    };
    const onClose = (reason, err) => {
      channel.off('message', onMessage);
      reject(err || new Error(`channel closed (${reason}) while waiting for a message`));
    };
    channel.on('message', onMessage);
    channel.once('close', onClose);
  });
}

// nextMessage, bounded: also rejects, naming `what`, when no such message
// came within `ms`.
function messageWithin(channel, ms, what, predicate) {
  return withTimeout(nextMessage(channel, predicate), ms, what);
}

module.exports = { nextMessage, messageWithin };
