'use strict';
// The JetStream side of durable channels: names, the work-queue stream and
// its consumers. One stream per procwire subject holds both directions:
//
//   <root>.<subject>.req               requests; one durable pull consumer
//                                      (the queue name) shared by every worker
//   <root>.<subject>.rep.<caller id>   the replies to one caller; that caller's
//                                      own durable consumer, dropped by the
//                                      server once the caller is gone
//
// Work-queue retention removes a message once its consumer acks it, so the
// stream only holds work that is not done yet (and replies not yet read).

const { invalidArg, validateSize } = require('../../validate');
const { natsError } = require('./connection');

const ROOT = '_PROCWIRE_Q';
const MS = 1_000_000;    // JetStream durations are in nanoseconds
const DEFAULTS = {
  ackWait: 30_000,
  duplicateWindow: 120_000,
  maxAge: 3_600_000,
  concurrency: 16,
  maxAckPending: 1024,
  callerIdle: 60_000,
};

// Stream and consumer names may not contain '.', '*', '>', spaces or path
// separators.
function nameToken(value) {
  return value.replace(/[^A-Za-z0-9_-]/g, '_');
}

// The durable settings of one listen() or connect() call, checked.
function queueSettings(subject, options) {
  const storage = options.storage === undefined ? 'file' : options.storage;
  if (storage !== 'file' && storage !== 'memory') throw invalidArg(`options.storage must be 'file' or 'memory', got ${String(storage)}`);
  const replicas = options.replicas === undefined ? undefined : validateSize(options.replicas, 'replicas', 1, 5);
  if (replicas === 0) throw invalidArg('options.replicas must be 1 to 5');
  const stream = options.stream === undefined ? `PROCWIRE_${nameToken(subject)}` : options.stream;
  if (typeof stream !== 'string' || !/^[A-Za-z0-9_-]{1,64}$/.test(stream)) {
    throw invalidArg(`options.stream must be a JetStream stream name (letters, digits, _ and -), got ${String(stream)}`);
  }
  const queue = options.queue === undefined ? 'procwire' : options.queue;
  if (typeof queue !== 'string' || !/^[A-Za-z0-9_-]{1,64}$/.test(queue)) {
    throw invalidArg(`options.queue of a durable channel must be a consumer name (letters, digits, _ and -), got ${String(queue)}`);
  }
  const size = (name, max = 2 ** 31 - 1) => validateSize(options[name], name, DEFAULTS[name], max);
  const settings = {
    subject, stream, queue, storage, replicas,
    requests: `${ROOT}.${subject}.req`,
    ackWait: size('ackWait'),
    duplicateWindow: size('duplicateWindow'),
    maxAge: size('maxAge'),
    concurrency: size('concurrency', 65536),
    maxAckPending: size('maxAckPending', 1 << 20),
    callerIdle: size('callerIdle'),
  };
  for (const name of ['ackWait', 'concurrency', 'maxAckPending']) {
    if (settings[name] === 0) throw invalidArg(`options.${name} must be at least 1`);
  }
  return settings;
}

function replySubject(settings, caller) {
  return `${ROOT}.${settings.subject}.rep.${caller}`;
}

// R3 on a cluster (fewer if it has fewer servers), R1 on a single server,
// unless options.replicas says.
function replicasFor(settings, nc) {
  if (settings.replicas !== undefined) return settings.replicas;
  const info = nc.info || {};
  if (!info.cluster) return 1;
  const urls = Array.isArray(info.connect_urls) ? info.connect_urls.length : 1;
  return Math.max(1, Math.min(3, urls));
}

// The stream, made if it does not exist yet. Every caller and worker runs
// this: whoever comes first makes it, the others find it.
async function ensureStream(link, settings) {
  const jsm = await link.jetstreamManager();
  try {
    return await jsm.streams.info(settings.stream);
  } catch { /* not found (or not reachable yet): make it */ }
  const config = {
    name: settings.stream,
    subjects: [`${ROOT}.${settings.subject}.>`],
    retention: 'workqueue',
    storage: settings.storage,
    num_replicas: replicasFor(settings, link.nc),
    duplicate_window: settings.duplicateWindow * MS,
    max_age: settings.maxAge * MS,
  };
  try {
    return await jsm.streams.add(config);
  } catch (err) {
    // Another process made it meanwhile.
    try {
      return await jsm.streams.info(settings.stream);
    } catch {
      throw natsError('ERR_PROCWIRE_CONNECT_FAILED', `cannot make the JetStream stream ${settings.stream}`, err);
    }
  }
}

async function ensureConsumer(link, settings, config) {
  const jsm = await link.jetstreamManager();
  try {
    await jsm.consumers.add(settings.stream, { ack_policy: 'explicit', deliver_policy: 'all', ...config });
  } catch (err) {
    // A durable consumer that exists already (made by another worker) is
    // fine as it is.
    try {
      await jsm.consumers.info(settings.stream, config.durable_name);
    } catch {
      throw natsError('ERR_PROCWIRE_CONNECT_FAILED', `cannot make the JetStream consumer ${config.durable_name}`, err);
    }
  }
  return link.jetstream().consumers.get(settings.stream, config.durable_name);
}

// The workers' shared consumer: maxAckPending bounds the requests out at
// workers at once (the fleet's backpressure), ackWait how long a worker may
// hold one without a progress ack before it goes to another worker.
function workerConsumer(link, settings) {
  return ensureConsumer(link, settings, {
    durable_name: settings.queue,
    filter_subject: settings.requests,
    ack_wait: settings.ackWait * MS,
    max_ack_pending: settings.maxAckPending,
  });
}

// One caller's reply consumer; the server removes it once the caller has
// been gone for callerIdle.
function callerConsumer(link, settings, caller) {
  return ensureConsumer(link, settings, {
    durable_name: `c_${caller}`,
    filter_subject: replySubject(settings, caller),
    ack_wait: settings.ackWait * MS,
    inactive_threshold: settings.callerIdle * MS,
  });
}

module.exports = { queueSettings, replySubject, ensureStream, workerConsumer, callerConsumer, ROOT };
