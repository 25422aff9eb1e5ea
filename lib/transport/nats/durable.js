'use strict';
// Durable request/reply over a JetStream work queue:
//
//   procwire.listen('nats://host:4222', { subject: 'jobs', durable: true }, (ch) => ch.respond(work))
//   const ch = await procwire.connect('nats://host:4222', { subject: 'jobs', durable: true })
//   await ch.request(job, { timeout })
//
// A caller's request is stored in a replicated stream (./queue.js) under a
// message id of its own, so a publish retried after a lost acknowledgement
// is stored once. Workers share one durable pull consumer; each takes at
// most `concurrency` requests at a time (and the consumer's `maxAckPending`
// bounds the whole fleet), sends progress acks while its responder runs,
// stores the reply in the caller's reply subject and only then acks the
// request. A worker that dies holding a request: JetStream gives it to
// another worker after `ackWait`. A reply stored twice (the first worker died
// after replying, before acking) is dropped by the stream's duplicate window
// and, failing that, by the caller, which takes one reply per request id.
//
// listen() gives one channel: the worker's end of the queue. connect() gives
// the caller's. Both are Channels: request() timeouts, abort signals, closing
// and coded errors work as on every other channel; stats() adds the durable
// counts (redeliveries, duplicatesSuppressed, ...).

const { Channel } = require('../../channel');
const { makeError } = require('../../errors');
const { validateObject, validateSize, validateSerialization } = require('../../validate');
const { DEFAULT_MAX_MESSAGE_SIZE } = require('../../protocol');
const { ServerBase } = require('../server');
const { kAccept, kClosed, kStart, kStop } = require('../symbols');
const { natsClient, natsError, openLink, serversFor, validateClientName } = require('./connection');
const { validateSubject, channelOptions } = require('./channel');
const { startListening } = require('./server');
const { queueSettings, ensureStream, workerConsumer, callerConsumer } = require('./queue');
const { CallerHandle, WorkerHandle } = require('./durable-handle');

const CANCELLING = new Set(['ERR_PROCWIRE_REQUEST_TIMEOUT', 'ERR_PROCWIRE_REQUEST_ABORTED']);
const HANDLE = Symbol('procwire.durableHandle');

class DurableChannel extends Channel {
  // As Channel's request(); a request that times out or is aborted is taken
  // back out of the queue if no worker has it yet, and its reply, should one
  // come, is dropped.
  request(value, options) {
    const handle = this[HANDLE];
    const before = handle.lastRequestId;
    const pending = super.request(value, options);
    const id = handle.lastRequestId;
    if (id === before || typeof handle.cancel !== 'function') return pending;
    return pending.catch((err) => {
      if (err && CANCELLING.has(err.code)) handle.cancel(id);
      throw err;
    });
  }

  // Channel's stats plus the durable counts: redeliveries (requests this
  // worker got again after another worker held them), duplicatesSuppressed
  // (replies stored or received twice for one request, dropped), lateReplies
  // (replies to requests that had timed out or were cancelled), republished
  // (publishes tried again), progressAcks and cancelled.
  stats() {
    return { ...super.stats(), ...this[HANDLE].durableStats };
  }
}

function makeChannel(handle, settings, serialization, options, peer) {
  const channel = new DurableChannel(null, channelOptions(options, serialization, handle, peer));
  channel[HANDLE] = handle;
  channel.subject = settings.subject;
  channel.stream = settings.stream;
  return channel;
}

function handleOptions(options, serialization) {
  return {
    serialization,
    maxMessageSize: validateSize(options.maxMessageSize, 'maxMessageSize', DEFAULT_MAX_MESSAGE_SIZE),
  };
}

// Checks everything before a connection is opened.
function settingsFor(options) {
  const subject = validateSubject(options.subject, 'options.subject');
  validateClientName(options.natsClient);
  const serialization = validateSerialization(options.serialization);
  return { settings: queueSettings(subject, options), serialization, hopts: handleOptions(options, serialization) };
}

async function withLink(servers, options, settings, body) {
  natsClient(options.natsClient).requireJetStream();
  const link = await openLink(servers, options);
  link.acquire();
  try {
    await ensureStream(link, settings);
    return await body(link);
  } catch (err) {
    throw err && err.code && String(err.code).startsWith('ERR_PROCWIRE')
      ? err : natsError('ERR_PROCWIRE_CONNECT_FAILED', 'JetStream is not available', err);
  } finally {
    link.release();
  }
}

// ---- the worker's end ----------------------------------------------------------

class DurableServer extends ServerBase {
  #servers;
  #options;
  #settings;
  #serialization;
  #hopts;
  // The one channel this worker serves, once started.
  #channel = null;

  constructor(servers, options) {
    super();
    this.#servers = servers;
    this.#options = options;
    ({ settings: this.#settings, serialization: this.#serialization, hopts: this.#hopts } = settingsFor(options));
    // Workers decode what callers sent: a fixed serialization, advanced unless given.
  }

  address() {
    const s = this.#settings;
    return { servers: this.#servers, subject: s.subject, queue: s.queue, stream: s.stream, durable: true };
  }

  async [kStart]() {
    await withLink(this.#servers, this.#options, this.#settings, async (link) => {
      const consumer = await workerConsumer(link, this.#settings);
      if (this[kClosed]) return;
      const handle = new WorkerHandle(link, this.#settings, this.#hopts);
      const channel = makeChannel(handle, this.#settings, this.#serialization, this.#options,
        { subject: this.#settings.subject, queue: this.#settings.queue });
      this.#channel = channel;
      this[kAccept](channel);
      handle.start(consumer);
    });
  }

  // Closing a durable listener stops its worker: requests it holds go back
  // to the queue for the other workers.
  [kStop]() {
    if (this.#channel) this.#channel.close();
  }
}

function listen(target, options, onChannel) {
  const server = new DurableServer(serversFor(target, options), options);
  if (onChannel !== undefined) server.on('channel', onChannel);
  startListening(server, 'NATS durable listen failed',
    (e) => (e.code === 'ERR_PROCWIRE_CONNECT_FAILED' ? makeError('ERR_PROCWIRE_LISTEN_FAILED', e.message, e) : e));
  return server;
}

// ---- the caller's end -------------------------------------------------------------

async function connect(target, options) {
  options = validateObject(options, 'options');
  const { settings, serialization, hopts } = settingsFor(options);
  const servers = serversFor(target, options);
  return withLink(servers, options, settings, async (link) => {
    const caller = link.client.nextId();
    const consumer = await callerConsumer(link, settings, caller);
    const handle = new CallerHandle(link, settings, hopts, caller);
    const channel = makeChannel(handle, settings, serialization, options, { subject: settings.subject, caller });
    handle.start(consumer);
    return channel;
  });
}

module.exports = { listen, connect, DurableChannel, DurableServer };
