'use strict';
// Echo child for the socket peers: connects to the driver and sends every
// message back (decoded and re-encoded, as a real service would).
//   argv: kind, address (JSON)
//   kinds: procwire-unix, procwire-tcp, procwire-tls, net-unix, net-tcp, redis, zmq

const net = require('net');
const path = require('path');

const kind = process.argv[2];
const address = JSON.parse(process.argv[3]);

async function main() {
  if (kind === 'procwire-unix' || kind === 'procwire-tcp' || kind === 'procwire-tls') {
    const procwire = require(path.join(__dirname, '..', '..'));
    // { tls } rides along in the address for the TLS peer.
    const ch = await procwire.connect(address, address.tls ? { tls: address.tls } : undefined);
    ch.on('message', (m) => ch.send(m));
    ch.on('close', () => process.exit(0));
    ch.on('error', () => {});
    ch.send({ ready: true });
  } else if (kind === 'net-unix' || kind === 'net-tcp') {
    const { ndjsonReader } = require('../lib/transports');
    const socket = address.path ? net.connect(address.path) : net.connect(address.port, address.host);
    socket.setNoDelay(true);
    socket.on('error', () => process.exit(0));
    socket.on('end', () => process.exit(0));
    socket.on('close', () => process.exit(0));
    ndjsonReader(socket, (m) => socket.write(`${JSON.stringify(m)}\n`));
    socket.write(`${JSON.stringify({ ready: true })}\n`);
  } else if (kind === 'redis') {
    const { RespClient } = require('../lib/resp');
    const sub = await RespClient.connect(address.path);
    const pub = await RespClient.connect(address.path);
    await sub.subscribe(address.req, (text) => pub.publish(address.res, JSON.stringify(JSON.parse(text))));
    sub.socket.on('close', () => process.exit(0));
    pub.publish(address.res, JSON.stringify({ ready: true }));
  } else if (kind === 'zmq') {
    const zmq = require('zeromq');
    const { zmqSender } = require('../lib/transports');
    const sock = new zmq.Pair({ sendHighWaterMark: 0, receiveHighWaterMark: 0 });
    sock.connect(address.endpoint);
    const send = zmqSender(sock);
    send({ ready: true });
    for await (const [frame] of sock) send(JSON.parse(frame.toString()));
  } else {
    throw new Error(`unknown kind ${kind}`);
  }
}

main().catch((err) => {
  process.stderr.write(`socket-echo ${kind}: ${err.stack || err}\n`);
  process.exit(1);
});
