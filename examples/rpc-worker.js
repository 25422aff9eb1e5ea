'use strict';
// RPC worker: the child registers one responder and does nothing else; the
// parent awaits answers. A responder keeps the child alive (as a 'message'
// listener would); disconnecting lets it exit.
//
//   node examples/rpc-worker.js

const path = require('path');
const { fork } = require('procwire');

async function main() {
  const worker = fork(path.join(__dirname, 'children', 'rpc-worker.js'), { child: 'procwire' });

  console.log('sum:', await worker.request({ op: 'sum', args: [1, 2, 3] }));
  console.log('upper:', await worker.request({ op: 'upper', args: ['procwire'] }));
  try {
    await worker.request({ op: 'divide', args: [1, 0] }, { timeout: 5000 });
  } catch (err) {
    // The worker's exception comes back as a coded error with the original inside.
    console.log(`${err.code}: ${err.remote.message}`);
  }
  worker.disconnect();
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
