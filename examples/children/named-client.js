'use strict';
// Joins a named channel by name alone, asks one question, and leaves.
const procwire = require('procwire');

async function main() {
  const channel = await procwire.connect(process.argv[2]);
  try {
    channel.send({ hello: `from pid ${process.pid}` });
    const answer = await channel.request({ text: 'the quick brown fox' });
    console.log('client got answer', answer);
  } finally {
    channel.close();  // Nothing else keeps this process alive.
  }
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
