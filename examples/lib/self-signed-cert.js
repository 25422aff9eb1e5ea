'use strict';
// A throwaway self-signed certificate for the TLS example, made with
// node:crypto alone (no openssl binary): an EC P-256 key, and an X.509 v3
// certificate for 127.0.0.1 and localhost, valid for one day, written out in
// DER by hand. For examples and tests only: real deployments use
// certificates from their own CA.

const crypto = require('crypto');

// DER: tag, length, contents.
function der(tag, ...parts) {
  const body = Buffer.concat(parts);
  let len;
  if (body.length < 0x80) len = Buffer.from([body.length]);
  else if (body.length < 0x100) len = Buffer.from([0x81, body.length]);
  else len = Buffer.from([0x82, body.length >> 8, body.length & 0xff]);
  return Buffer.concat([Buffer.from([tag]), len, body]);
}

const seq = (...p) => der(0x30, ...p);
const set = (...p) => der(0x31, ...p);
// A non-negative INTEGER from big-endian bytes, in DER's shortest form: no
// leading zero byte unless the next byte's top bit needs it (a random serial
// starting with 0x00 was refused by OpenSSL as "illegal padding").
const int = (buf) => {
  let start = 0;
  while (start < buf.length - 1 && buf[start] === 0 && !(buf[start + 1] & 0x80)) start++;
  const body = buf.subarray(start);
  return der(0x02, body[0] & 0x80 ? Buffer.concat([Buffer.from([0]), body]) : body);
};
const utf8 = (s) => der(0x0c, Buffer.from(s, 'utf8'));
const octets = (buf) => der(0x04, buf);
const bits = (buf) => der(0x03, Buffer.from([0]), buf);

function oid(text) {
  const [a, b, ...rest] = text.split('.').map(Number);
  const bytes = [40 * a + b];
  for (const n of rest) {
    const enc = [n & 0x7f];
    for (let v = n >> 7; v > 0; v >>= 7) enc.unshift((v & 0x7f) | 0x80);
    bytes.push(...enc);
  }
  return der(0x06, Buffer.from(bytes));
}

// UTCTime, YYMMDDHHMMSSZ.
function time(date) {
  return der(0x17, Buffer.from(`${date.toISOString().slice(2, 19).replace(/[-:T]/g, '')}Z`));
}

function selfSignedCert({ commonName = 'procwire-example', ips = ['127.0.0.1'], dns = ['localhost'] } = {}) {
  const { privateKey, publicKey } = crypto.generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  const ecdsaWithSha256 = seq(oid('1.2.840.10045.4.3.2'));
  const name = seq(set(seq(oid('2.5.4.3'), utf8(commonName))));
  const now = Date.now();
  const altNames = seq(
    ...ips.map((ip) => der(0x87, Buffer.from(ip.split('.').map(Number)))),
    ...dns.map((d) => der(0x82, Buffer.from(d))));
  const tbs = seq(
    der(0xa0, int(Buffer.from([2]))),                    // version 3
    int(crypto.randomBytes(8)),                          // serial number
    ecdsaWithSha256,
    name,                                                // issuer: itself
    seq(time(new Date(now - 60_000)), time(new Date(now + 86_400_000))),
    name,                                                // subject
    publicKey.export({ type: 'spki', format: 'der' }),
    der(0xa3, seq(seq(oid('2.5.29.17'), octets(altNames)))));
  const signature = crypto.sign('sha256', tbs, privateKey);
  const cert = seq(tbs, ecdsaWithSha256, bits(signature));
  const pem = `-----BEGIN CERTIFICATE-----\n${cert.toString('base64').match(/.{1,64}/g).join('\n')}\n-----END CERTIFICATE-----\n`;
  return { key: privateKey.export({ type: 'pkcs8', format: 'pem' }), cert: pem };
}

module.exports = { selfSignedCert };
