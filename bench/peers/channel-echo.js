'use strict';
// Echo child of the fork-vs-named suite: the same program answers as a
// forked procwire child (procwire.parent) or as a plain `node` process that
// connects to a named channel (argv[2]: the name, argv[3]: the channel's
// options as JSON), so the two rows differ only in how the channel was made.

const path = require('path');
const procwire = require(path.join(__dirname, '..', '..'));

async function open() {
  if (process.argv[2] === undefined) return procwire.parent;
  return procwire.connect(process.argv[2], JSON.parse(process.argv[3] || '{}'));
}

open().then((ch) => {
  ch.on('message', (m) => ch.send(m));
  ch.on('close', () => process.exit(0));
  ch.on('disconnect', () => process.exit(0));
  ch.on('error', () => {});
  // The driver starts only after this arrives, so no measurement includes
  // the start-up (nor sends before the named channel's hello is done).
  ch.send({ ready: true });
}, (err) => {
  process.stderr.write(`channel-echo: ${err.stack || err}\n`);
  process.exit(1);
});
