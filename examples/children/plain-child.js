'use strict';
// A plain Node child: exactly what it would be under child_process.fork.
process.on('message', (message) => {
  const { n } = /** @type {{ n: number }} */ (message);
  process.send({ n, square: n * n, from: process.pid });
});
