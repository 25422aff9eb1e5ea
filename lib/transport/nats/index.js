'use strict';
// procwire channels over NATS: core NATS (this file, ./server.js, ./handle.js)
// and durable request/reply over JetStream (./durable.js). The client is
// `@nats-io/transport-node` v3 or `nats` v2 (./connection.js picks it).
//
//   procwire.listen('nats://host:4222', { subject: 'jobs', queue: 'workers' }, (ch) => ...)
//   const ch = await procwire.connect('nats://host:4222', { subject: 'jobs' })
//
// Addressing. A listener subscribes to `subject` in a queue group (default
// 'procwire'), so every hello goes to exactly one listener of the group: many
// worker processes on many hosts share one subject and NATS spreads the
// channels over them. A connecting client picks a private subject
// <prefix>.<nuid> (prefix '_PROCWIRE'), subscribes to it and sends a hello as
// a NATS request on `subject`; the listener that gets it makes the channel's
// other end on its own private subject and replies with it. From then on the
// two ends publish straight to each other's subject: one NATS message per
// procwire message, its payload the codec's payload without the stream
// framing (advanced: the V8 serialization bytes with no u32 length header;
// json: the JSON text with no '\n'), so NATS tools and other clients can read
// and write them.
//
// Requests are NATS request/reply: channel.request() publishes the payload to
// the peer's subject with a reply subject <own subject>.r.<id>; the peer's
// responder answers there (an error as JSON with a `Procwire-Error` header).
// A plain NATS client can `nc.request(<channel subject>, payload)` too.
//
// Delivery: core NATS is at-most-once. Messages are delivered in order, but a
// message that is in flight when a NATS server or connection fails is lost,
// and nothing is stored for a peer that is not subscribed. Requests therefore
// take a `timeout`, and `retries` to re-send after a timeout (or after "no
// responders" while the peer resubscribes during a failover), which makes a
// request at-least-once: the responder may run twice. While the client is
// disconnected, sends are kept (and count against the high-water mark) and
// published in order after it reconnects; what was already handed to the
// failed connection may be lost.

const { Channel } = require('../../channel');
const { makeError } = require('../../errors');
const { validateObject, validateSize, validateSerialization } = require('../../validate');
const { DEFAULT_HELLO_TIMEOUT } = require('../../protocol');
const { listenArguments } = require('../server');
const { natsError, openLink, serversFor } = require('./connection');
const { NatsHandle, CTL } = require('./handle');
const { channelOptions, handleOptions, validateSubject, DEFAULT_PREFIX } = require('./channel');
const server = require('./server');
const durable = require('./durable');

// listen(target[, options][, onChannel]): options.durable picks the durable
// listener (./durable.js).
function listen(target, options, onChannel) {
  const args = listenArguments(options, onChannel);
  if (args.options.durable) return durable.listen(target, args.options, args.onChannel);
  return server.listen(target, args.options, args.onChannel);
}

// ---- connect --------------------------------------------------------------------------

async function hello(link, subject, body, timeout) {
  const deadline = Date.now() + timeout;
  const data = Buffer.from(JSON.stringify(body));
  for (;;) {
    const left = deadline - Date.now();
    if (left <= 0) break;
    let reply;
    try {
      reply = await link.nc.request(subject, data, { timeout: left, headers: link.headers(CTL, 'hello') });
    } catch (err) {
      // 503: nobody subscribed (yet: a listener's interest may still be on its
      // way through the cluster). Try again until the deadline.
      if (link.client.isNoResponders(err)) {
        await new Promise((r) => setTimeout(r, Math.min(100, Math.max(1, deadline - Date.now()))));
        continue;
      }
      if (link.client.isTimeout(err)) break;
      throw natsError('ERR_PROCWIRE_CONNECT_FAILED', `procwire hello on ${subject} failed`, err);
    }
    let answer;
    try { answer = JSON.parse(Buffer.from(reply.data).toString()); } catch { answer = null; }
    if (answer && answer.error) {
      throw makeError('ERR_PROCWIRE_CONNECT_FAILED', `listener on ${subject} refused: ${answer.error.message}`);
    }
    if (!answer || typeof answer.subject !== 'string') {
      throw makeError('ERR_PROCWIRE_CONNECT_FAILED', `unexpected hello reply on ${subject}`);
    }
    return answer.subject;
  }
  throw makeError('ERR_PROCWIRE_CONNECT_FAILED', `no procwire listener answered on ${subject} within ${timeout} ms`);
}

async function connect(target, options) {
  options = validateObject(options, 'options');
  if (options.durable) return durable.connect(target, options);
  const subject = validateSubject(options.subject, 'options.subject');
  const prefix = options.prefix === undefined ? DEFAULT_PREFIX : validateSubject(options.prefix, 'options.prefix');
  const serialization = validateSerialization(options.serialization);
  const helloTimeout = validateSize(options.helloTimeout, 'helloTimeout', DEFAULT_HELLO_TIMEOUT, 2 ** 31 - 1);
  const hopts = handleOptions(options, serialization);
  const servers = serversFor(target, options);
  const link = await openLink(servers, options);
  const own = `${prefix}.${link.client.nextId()}`;
  const handle = new NatsHandle(link, own, null, hopts);
  let peer;
  try {
    peer = await hello(link, subject, { v: 1, subject: own, serialization, name: options.name }, helloTimeout);
  } catch (err) {
    handle.close();
    throw err;
  }
  handle.setPeer(peer);
  const channel = new Channel(null, channelOptions(options, serialization, handle, { subject: peer }));
  channel.subject = own;
  handle.startHeartbeat();
  return channel;
}

module.exports = {
  listen, connect, NatsServer: server.NatsServer,
  DurableChannel: durable.DurableChannel, DurableServer: durable.DurableServer,
};
