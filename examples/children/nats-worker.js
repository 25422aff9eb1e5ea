'use strict';
// One worker of the fleet: takes channels from the 'jobs' subject in the
// 'workers' queue group and answers their requests until SIGTERM.
const procwire = require('procwire');

const server = procwire.listen(process.argv[2], { subject: 'jobs', queue: 'workers' }, (channel) => {
  channel.respond(async ({ job, text }) => ({ job, worker: process.pid, result: text.toUpperCase() }));
});
server.ready.then(() => console.log('ready'), (err) => {
  console.error(err);
  process.exit(1);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
