'use strict';
// A named channel between unrelated processes: this process listens on a
// name; another program, started on its own (not forked: it has no channel
// to us), connects by that name. Same user only by default: the socket lives
// in a private directory, and the hello proves knowledge of a key file only
// this user can read.
//
//   node examples/named-channel.js

const { spawn } = require('child_process');
const path = require('path');
const procwire = require('procwire');

async function main() {
  const name = `example-jobs-${process.pid}`;
  const server = procwire.listen(name, (channel) => {
    channel.respond(async ({ text }) => ({ words: text.split(/\s+/).length }));
    channel.on('message', (m) => console.log('server got message', m));
  });
  await server.ready;
  console.log('listening at', server.address().path);

  // An unrelated program: it only knows the name.
  const client = spawn(process.execPath, [path.join(__dirname, 'children', 'named-client.js'), name],
    { stdio: 'inherit' });
  const code = await new Promise((resolve) => client.on('exit', resolve));
  console.log(`client exited with code ${code}`);
  server.close();  // Removes the socket and key files.
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
