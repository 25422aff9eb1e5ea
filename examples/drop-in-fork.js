'use strict';
// Drop-in fork: the child is a plain Node program (process.send and
// process.on('message'), nothing procwire in it); only the parent changes
// `require('child_process').fork` to `require('procwire').fork`.
//
//   node examples/drop-in-fork.js

const path = require('path');
const { fork } = require('procwire');

const child = fork(path.join(__dirname, 'children', 'plain-child.js'));

let answers = 0;
child.on('message', (message) => {
  console.log('parent got', message);
  if (++answers === 3) child.disconnect();  // The child exits once its channel closes.
});
child.on('exit', (code) => console.log(`child exited with code ${code}`));

for (const n of [1, 2, 3]) child.send({ n });
