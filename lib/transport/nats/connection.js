'use strict';
// The NATS client and the connections procwire opens with it.
//
// Two clients are supported: `@nats-io/transport-node` (v3, the maintained
// one, with `@nats-io/jetstream` for durable channels) and `nats` (v2, which
// no longer gets new work). Both are optional peer dependencies: most users
// never open a NATS channel, so the client is loaded on first use, and its
// absence is a coded error that names the package to install rather than a
// crash at require('procwire'). This file is the one place that knows which
// client is in use; everything else calls the small adapter it returns.

const fs = require('fs');
const { makeError } = require('../../errors');
const { invalidArg, validateObject } = require('../../validate');

const V3 = '@nats-io/transport-node';
const V2 = 'nats';
const JETSTREAM = '@nats-io/jetstream';
const INSTALL_HINT = `run \`npm install ${V3}\` (and \`npm install ${JETSTREAM}\` for durable channels)`;

// Wraps a NATS error in a coded one.
function natsError(code, message, err) {
  return makeError(code, err ? `${message}: ${err.message}` : message, err || undefined,
    err && err.code !== undefined ? { natsCode: err.code } : undefined);
}

function missing(err, name) {
  return Boolean(err && err.code === 'MODULE_NOT_FOUND' && err.message.includes(`'${name}'`));
}

// An error or any error in its `cause` chain matching `test`.
function anyCause(err, test) {
  for (let e = err, depth = 0; e && depth < 5; e = e.cause, depth++) {
    if (test(e)) return true;
  }
  return false;
}

// The adapter over one client module: the few calls procwire needs, the same
// whichever client provides them.
function adapter(name, mod) {
  const v3 = name === V3;
  let jsModule = null;
  function jetstreamModule() {
    if (!v3) return null;
    if (jsModule === null) {
      try {
        jsModule = require(JETSTREAM);
      } catch (err) {
        throw makeError('ERR_PROCWIRE_NATS', missing(err, JETSTREAM)
          ? `durable NATS channels need the ${JETSTREAM} package beside ${V3}: run \`npm install ${JETSTREAM}\``
          : `the ${JETSTREAM} package could not be loaded (${err.message})`, err);
      }
    }
    return jsModule;
  }
  return Object.freeze({
    name,
    connect: (options) => mod.connect(options),
    headers: () => mod.headers(),
    nextId: () => mod.nuid.next(),
    nkeyAuthenticator: (seed) => mod.nkeyAuthenticator(seed),
    credsAuthenticator: (creds) => mod.credsAuthenticator(creds),
    // Throws the coded "install @nats-io/jetstream" error before any
    // connection is opened, if it is missing.
    requireJetStream: () => { jetstreamModule(); },
    jetstream: (nc) => (v3 ? jetstreamModule().jetstream(nc) : nc.jetstream()),
    jetstreamManager: (nc) => (v3 ? jetstreamModule().jetstreamManager(nc) : nc.jetstreamManager()),
    // "No responders" (503): nobody subscribes to the subject.
    isNoResponders: (err) => anyCause(err, (e) => String(e.code) === '503' || e.name === 'NoRespondersError' ||
      (typeof e.isNoResponders === 'function' && e.isNoResponders())),
    isTimeout: (err) => anyCause(err, (e) => e.code === 'TIMEOUT' || e.name === 'TimeoutError'),
  });
}

const loaded = new Map();

// options.natsClient: undefined, or the name of one of the two clients.
function validateClientName(preference) {
  if (preference !== undefined && preference !== V3 && preference !== V2) {
    throw invalidArg(`options.natsClient must be '${V3}' or '${V2}', got ${String(preference)}`);
  }
  return preference;
}

// The client adapter: `preference` names one of the two packages, or is
// undefined for the maintained client if installed, else `nats` v2.
function natsClient(preference) {
  validateClientName(preference);
  const key = preference || 'auto';
  if (loaded.has(key)) return loaded.get(key);
  const order = preference === undefined ? [V3, V2] : [preference];
  let failure = null;
  for (const name of order) {
    try {
      const client = adapter(name, require(name));
      loaded.set(key, client);
      return client;
    } catch (err) {
      if (!missing(err, name)) {
        throw makeError('ERR_PROCWIRE_NATS', `the ${name} package could not be loaded (${err.message}); ${INSTALL_HINT}`, err);
      }
      failure = failure || err;
    }
  }
  throw makeError('ERR_PROCWIRE_NATS', preference === undefined
    ? `NATS channels need a NATS client (an optional peer dependency of procwire): ${INSTALL_HINT}`
    : `options.natsClient names ${preference}, which is not installed: run \`npm install ${preference}\``, failure);
}

// 'nats://a:4222' or 'nats://a:4222,nats://b:4222', plus options.servers.
function serversFor(target, options) {
  const list = String(target).split(',').map((s) => s.trim()).filter(Boolean);
  if (options.servers !== undefined) {
    if (!Array.isArray(options.servers)) throw invalidArg('options.servers must be an array of URLs');
    list.push(...options.servers.map(String));
  }
  return list;
}

// options.credentials: { user, pass }, { token }, { nkey: seed }, or
// { creds: the text of a .creds file, or its path }, as the client's own
// connect options.
function credentialOptions(client, credentials) {
  if (credentials === undefined) return {};
  const c = validateObject(credentials, 'options.credentials');
  const text = (v, name) => {
    if (typeof v !== 'string' || v.length === 0) throw invalidArg(`options.credentials.${name} must be a non-empty string`);
    return v;
  };
  if (c.user !== undefined) return { user: text(c.user, 'user'), pass: c.pass === undefined ? undefined : text(c.pass, 'pass') };
  if (c.token !== undefined) return { token: text(c.token, 'token') };
  if (c.nkey !== undefined) return { authenticator: client.nkeyAuthenticator(new TextEncoder().encode(text(c.nkey, 'nkey'))) };
  if (c.creds !== undefined) {
    let creds = text(c.creds, 'creds');
    if (!creds.includes('-----BEGIN')) {
      try {
        creds = fs.readFileSync(creds, 'utf8');
      } catch (err) {
        throw invalidArg(`options.credentials.creds: cannot read ${creds} (${err.code})`);
      }
    }
    return { authenticator: client.credsAuthenticator(new TextEncoder().encode(creds)) };
  }
  throw invalidArg('options.credentials needs user (and pass), token, nkey or creds');
}

// The client's connect options: procwire's defaults (reconnect for ever),
// the credentials, options.tls (the client's TLS options: caFile, certFile,
// keyFile, or ca/cert/key text) and options.nats, passed through as they are
// (reconnect policy: maxReconnectAttempts, reconnectTimeWait, ...).
function natsOptions(client, servers, options) {
  const extra = validateObject(options.nats, 'options.nats');
  const tls = options.tls === undefined ? {} : { tls: validateObject(options.tls, 'options.tls') };
  return {
    servers,
    maxReconnectAttempts: -1,
    reconnectTimeWait: 500,
    ...credentialOptions(client, options.credentials),
    ...tls,
    ...extra,
  };
}

// ---- one NATS connection, shared by the channels that use it ----------------

const LINK = Symbol('procwire.natsLink');

class Link {
  constructor(client, nc, owned) {
    this.client = client;
    this.nc = nc;
    this.owned = owned;
    this.users = 0;
    this.handles = new Set();
    this.listeners = new Set();
    this.online = true;
    this.closed = false;
    this._js = null;
    this._jsm = null;
    this._watch();
    nc.closed().then((err) => this._onClosed(err), (err) => this._onClosed(err));
  }

  async _watch() {
    try {
      for await (const s of this.nc.status()) {
        if (s.type === 'disconnect') this.online = false;
        else if (s.type === 'reconnect') this.online = true;
        // v2 statuses carry `data`, v3's name their fields (server, ...).
        const status = { type: s.type, data: s.data !== undefined ? s.data : s.server };
        for (const l of this.listeners) l(status);
        for (const h of [...this.handles]) h.onStatus(status);
      }
    } catch { /* the iterator ends when the connection closes */ }
  }

  // Connected right now? (The status event can lag the socket by a tick; the
  // protocol's flag does not.)
  isOnline() {
    if (this.closed || this.nc.isClosed()) return false;
    const p = this.nc.protocol;
    if (p && p.connected === false) return false;
    return this.online;
  }

  headers(key, value) {
    const h = this.client.headers();
    h.set(key, value);
    return h;
  }

  // JetStream contexts, made once per connection.
  jetstream() {
    if (this._js === null) this._js = this.client.jetstream(this.nc);
    return this._js;
  }

  async jetstreamManager() {
    if (this._jsm === null) this._jsm = await this.client.jetstreamManager(this.nc);
    return this._jsm;
  }

  _onClosed(err) {
    this.closed = true;
    this.online = false;
    for (const h of [...this.handles]) h.onLinkClosed(err);
  }

  acquire() {
    this.users++;
  }

  release() {
    if (--this.users > 0 || !this.owned || this.closed) return;
    // Let the last publishes (a bye) reach the server, then close.
    const nc = this.nc;
    let timer;
    Promise.race([nc.flush(), new Promise((r) => { timer = setTimeout(r, 2000); })])
      .catch(() => {})
      .finally(() => { clearTimeout(timer); nc.close().catch(() => {}); });
  }
}

async function openLink(servers, options) {
  if (options.connection !== undefined) {
    const nc = options.connection;
    if (nc === null || typeof nc !== 'object' || typeof nc.publish !== 'function' || typeof nc.subscribe !== 'function') {
      throw invalidArg(`options.connection must be a NatsConnection from ${V3} or ${V2}`);
    }
    if (!nc[LINK]) nc[LINK] = new Link(natsClient(options.natsClient), nc, false);
    return nc[LINK];
  }
  if (servers.length === 0) throw invalidArg('a NATS URL (nats://host:port) is required');
  const client = natsClient(options.natsClient);
  const connectOptions = natsOptions(client, servers, options);
  let nc;
  try {
    nc = await client.connect(connectOptions);
  } catch (err) {
    throw natsError('ERR_PROCWIRE_CONNECT_FAILED', `cannot connect to NATS at ${servers.join(',')}`, err);
  }
  return new Link(client, nc, true);
}

module.exports = { natsClient, validateClientName, natsError, serversFor, openLink, Link, V2, V3, JETSTREAM };
