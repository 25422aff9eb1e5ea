'use strict';
// The echo child of scripts/cpu-ab.js; 'cpu' asks for its CPU time so far.
process.on('message', (m) => {
  if (m === 'cpu') { process.send({ cpu: process.cpuUsage() }); return; }
  process.send(m);
});
