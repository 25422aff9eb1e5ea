'use strict';
// The listening end of core NATS channels: a queue subscription on the
// listener's subject that answers each client's hello with a new channel.

const { Channel } = require('../../channel');
const { makeError } = require('../../errors');
const { validateSerialization } = require('../../validate');
const { ServerBase, listenArguments } = require('../server');
const { kAccept, kClosed, kReport, kStart, kStop } = require('../symbols');
const { natsError, openLink, serversFor, validateClientName } = require('./connection');
const { NatsHandle, CTL } = require('./handle');
const { channelOptions, handleOptions, validateSubject, DEFAULT_PREFIX, DEFAULT_QUEUE } = require('./channel');

// ---- listen -----------------------------------------------------------------------

class NatsServer extends ServerBase {
  #servers;
  #options;
  #subject;
  #outbox;
  #prefix;
  // The shared NATS connection and the hello subscription, once started.
  #link = null;
  #sub = null;
  #onStatus = null;

  constructor(servers, options) {
    super();
    this.#servers = servers;
    this.#options = options;
    this.#subject = validateSubject(options.subject, 'options.subject');
    validateClientName(options.natsClient);
    this.#outbox = options.queue === undefined ? DEFAULT_QUEUE : validateSubject(options.queue, 'options.queue');
    this.#prefix = options.prefix === undefined ? DEFAULT_PREFIX : validateSubject(options.prefix, 'options.prefix');
    if (options.serialization !== undefined) validateSerialization(options.serialization);
    handleOptions(options, 'advanced');  // validates early
  }

  address() {
    return { servers: this.#servers, subject: this.#subject, queue: this.#outbox };
  }

  get connection() {
    return this.#link ? this.#link.nc : null;
  }

  async [kStart]() {
    const link = await openLink(this.#servers, this.#options);
    if (this[kClosed]) {
      link.acquire();
      link.release();
      return;
    }
    this.#link = link;
    link.acquire();
    this.#onStatus = (s) => this.emit('status', s);
    link.listeners.add(this.#onStatus);
    this.#sub = link.nc.subscribe(this.#subject, { queue: this.#outbox, callback: (err, msg) => this.#onHello(err, msg) });
    // The subscription is registered once the server answers this PING.
    await link.nc.flush();
  }

  #refuse(msg, message) {
    if (!msg.reply) return;
    try {
      msg.respond(Buffer.from(JSON.stringify({ error: { message, code: 'ERR_PROCWIRE_CONNECT_FAILED' } })));
    } catch { /* closed */ }
    this.emit('reject', makeError('ERR_PROCWIRE_CONNECT_FAILED', message));
  }

  #onHello(err, msg) {
    if (err) {
      this[kReport](natsError('ERR_PROCWIRE_NATS', 'NATS subscription failed', err));
      return;
    }
    if (this[kClosed]) return;
    const h = msg.headers;
    if (h === undefined || h.get(CTL) !== 'hello' || !msg.reply) {
      this.#refuse(msg, `not a procwire hello on ${this.#subject}`);
      return;
    }
    let hello;
    try {
      hello = JSON.parse(Buffer.from(msg.data).toString());
      validateSubject(hello.subject, 'hello.subject');
      hello.serialization = validateSerialization(hello.serialization);
    } catch (e) {
      this.#refuse(msg, `bad procwire hello: ${e.message}`);
      return;
    }
    if (this.#options.serialization !== undefined && hello.serialization !== this.#options.serialization) {
      this.#refuse(msg, `this listener speaks ${this.#options.serialization}, the client asked for ${hello.serialization}`);
      return;
    }
    const subject = `${this.#prefix}.${this.#link.client.nextId()}`;
    const handle = new NatsHandle(this.#link, subject, hello.subject, handleOptions(this.#options, hello.serialization));
    const channel = new Channel(null, channelOptions(this.#options, hello.serialization, handle,
      { subject: hello.subject, name: typeof hello.name === 'string' ? hello.name : undefined }));
    channel.subject = subject;
    this[kAccept](channel);
    try {
      msg.respond(Buffer.from(JSON.stringify({ v: 1, subject })));
    } catch (e) {
      channel.destroy(natsError('ERR_PROCWIRE_NATS', 'hello reply failed', e));
      return;
    }
    handle.startHeartbeat();
  }

  // close() (ServerBase) stops taking new channels; open channels stay open
  // (the connection closes with the last of them).
  [kStop]() {
    if (this.#sub) {
      try { this.#sub.unsubscribe(); } catch { /* closed */ }
    }
    if (this.#link) {
      this.#link.listeners.delete(this.#onStatus);
      this.#link.release();
    }
  }
}

// Starts a NATS server object (core or durable): `ready` resolves once it
// listens; a failure is emitted as 'error' when someone listens for it, and
// rejects `ready` with rejection(err).
function startListening(server, what, rejection) {
  server.ready = new Promise((resolve, reject) => {
    server[kStart]().then(() => {
      if (!server[kClosed]) server.emit('listening');
      resolve(server);
    }, (err) => {
      const e = err && err.code && String(err.code).startsWith('ERR_PROCWIRE')
        ? err : natsError('ERR_PROCWIRE_LISTEN_FAILED', what, err);
      if (server.listenerCount('error') > 0) server.emit('error', e);
      reject(rejection(e));
    });
  });
  server.ready.catch(() => {});
}

function listen(target, options, onChannel) {
  ({ options, onChannel } = listenArguments(options, onChannel));
  const server = new NatsServer(serversFor(target, options), options);
  if (onChannel !== undefined) server.on('channel', onChannel);
  startListening(server, 'NATS listen failed', (e) => e);
  return server;
}

module.exports = { listen, startListening, NatsServer };
