'use strict';
// TCP between hosts, encrypted: a TLS server and a client that trusts its
// certificate, plus procwire's secret hello on top (both ends must know the
// secret). Here both ends run on loopback in one process so the example is
// self-contained; across hosts, give `host` the server's address and the
// client the server's certificate (or your CA) as `ca`.
//
//   node examples/tcp-tls.js

const crypto = require('crypto');
const procwire = require('procwire');
const { selfSignedCert } = require('./lib/self-signed-cert');

async function main() {
  // Made at run time with node:crypto; in production, your own certificate.
  const { key, cert } = selfSignedCert({ ips: ['127.0.0.1'] });
  // Shared out of band in real life (an environment variable, a secret store).
  const secret = crypto.randomBytes(32);

  const server = procwire.listen({ port: 0, host: '127.0.0.1' }, { secret, tls: { key, cert } }, (channel) => {
    console.log('server: channel over', channel.transport);
    channel.respond(async (order) => ({ accepted: order.items.length, by: process.pid }));
  });
  server.on('reject', (err) => console.log('server refused a peer:', err.code));
  await server.ready;
  const { port } = server.address();

  const channel = await procwire.connect({ port, host: '127.0.0.1' }, { secret, tls: { ca: cert } });
  console.log('client: reply', await channel.request({ items: ['a', 'b', 'c'] }));
  channel.close();

  // A client with the wrong secret is refused on both sides.
  try {
    await procwire.connect({ port, host: '127.0.0.1' }, { secret: crypto.randomBytes(32), tls: { ca: cert } });
  } catch (err) {
    console.log('client with a wrong secret:', err.code);
  }
  server.close();
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
