'use strict';
// procwire.Framer: byte streams in arbitrary pieces -> whole messages, in
// order; zero copy for frames inside a chunk; bad frames reported without
// losing their neighbours; oversize headers fatal.

const { describe, test } = require('node:test');
const assert = require('assert');
const procwire = require('..');
const corpus = require('./fixtures/corpus');

const { Framer } = procwire;
const { advanced, json } = procwire.codec;
const T = { timeout: 60000 };

function collectErrors() {
  const errors = [];
  return { errors, onError: (err) => errors.push(err) };
}

// Small corpus values (no ports: they need cleanup; no large ones).
function smallCases() {
  return corpus.build().filter((c) => !c.large && !c.cleanup);
}

function assertMessages(cases, messages, label) {
  assert.strictEqual(messages.length, cases.length, `${label}: message count`);
  cases.forEach((c, i) => corpus.assertCase(c, messages[i], `${label} #${i}`));
}

const be32 = (n) => {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n >>> 0, 0);
  return b;
};

describe('advanced framer', () => {
  test('many frames in one chunk arrive in order', T, () => {
    const cases = smallCases();
    const chunk = Buffer.concat(cases.map((c) => advanced.encode(c.value)));
    const framer = new Framer();
    const messages = framer.push(chunk);
    assertMessages(cases, messages, 'one chunk');
    assert.strictEqual(framer.buffering, 0);
  });

  test('every split position, including inside length headers', T, () => {
    const cases = smallCases().filter((c) => ['mixed', 'number one', 'empty string',
      'Uint8Array with constructor = Buffer', 'shared references', 'Float64Array at odd offset',
      'two-byte strings at varied offsets'].includes(c.name));
    assert.strictEqual(cases.length, 7);
    const frames = cases.map((c) => advanced.encode(c.value));
    const chunk = Buffer.concat(frames);
    const boundaries = new Set([0]);
    frames.reduce((at, f) => { boundaries.add(at + f.length); return at + f.length; }, 0);
    for (let i = 0; i <= chunk.length; i++) {
      const framer = new Framer();
      const first = framer.push(chunk.subarray(0, i));
      // whatever is not yet a whole frame is held
      let whole = 0;
      let consumed = 0;
      for (const f of frames) {
        if (consumed + f.length > i) break;
        consumed += f.length;
        whole++;
      }
      assert.strictEqual(first.length, whole, `split ${i}`);
      assert.strictEqual(framer.buffering, i - consumed, `split ${i}: buffering`);
      const second = framer.push(chunk.subarray(i));
      assertMessages(cases, [...first, ...second], `split ${i}`);
      assert.strictEqual(framer.buffering, 0);
    }
    // three pieces: every pair of cut points in the first 40 bytes
    for (let i = 0; i < 40; i++) {
      for (let j = i; j < 40; j++) {
        const framer = new Framer();
        const out = [
          ...framer.push(chunk.subarray(0, i)),
          ...framer.push(chunk.subarray(i, j)),
          ...framer.push(chunk.subarray(j)),
        ];
        assertMessages(cases, out, `cuts ${i},${j}`);
      }
    }
  });

  test('one byte at a time', T, () => {
    const cases = smallCases().slice(0, 60);
    const chunk = Buffer.concat(cases.map((c) => advanced.encode(c.value)));
    const framer = new Framer();
    const out = [];
    for (let i = 0; i < chunk.length; i++) out.push(...framer.push(chunk.subarray(i, i + 1)));
    assertMessages(cases, out, 'bytewise');
    assert.strictEqual(framer.buffering, 0);
  });

  test('empty chunks are harmless', T, () => {
    const framer = new Framer();
    assert.deepStrictEqual(framer.push(Buffer.alloc(0)), []);
    const f = advanced.encode({ a: 1 });
    assert.deepStrictEqual(framer.push(f.subarray(0, 2)), []);
    assert.deepStrictEqual(framer.push(Buffer.alloc(0)), []);
    assert.deepStrictEqual(framer.push(f.subarray(2)), [{ a: 1 }]);
  });

  test('frames inside a chunk are decoded in place (zero copy); split ones are copied', T, () => {
    const u8 = new Uint8Array([1, 2, 3, 4, 5, 6, 7]);
    const buf = Buffer.from('in place');
    const frames = [advanced.encode(u8), advanced.encode({ buf }), advanced.encode(u8)];
    const chunk = Buffer.concat(frames);
    const framer = new Framer();
    const [a, b, c] = framer.push(chunk);
    assert.deepStrictEqual(a, u8);
    assert.strictEqual(a.buffer, chunk.buffer, 'view aliases the pushed chunk');
    assert.strictEqual(a.byteOffset, chunk.byteOffset + 10);
    assert.ok(Buffer.isBuffer(b.buf));
    assert.strictEqual(b.buf.buffer, chunk.buffer, 'Buffer aliases the pushed chunk');
    assert.strictEqual(c.buffer, chunk.buffer);
    chunk[10] = 99;
    assert.strictEqual(a[0], 99, 'it is the same memory');

    // A chunk that is a view into a larger ArrayBuffer: still the same memory.
    const big = new ArrayBuffer(frames[0].length + 64);
    const inner = new Uint8Array(big, 13, frames[0].length);
    inner.set(frames[0]);
    const [d] = new Framer().push(inner);
    assert.strictEqual(d.buffer, big);
    assert.strictEqual(d.byteOffset, 13 + 10);

    // Unaligned in the chunk -> a copy, still correct.
    const f64 = new Float64Array([1.5, -2.25]);
    const ff = advanced.encode(f64);
    for (let at = 0; at < 8; at++) {
      const ab = new ArrayBuffer(ff.length + 16);
      const view = new Uint8Array(ab, at, ff.length);
      view.set(ff);
      const [x] = new Framer().push(view);
      assert.deepStrictEqual(x, f64);
      assert.strictEqual(x.buffer === ab, (at + 10) % 8 === 0, `f64 at ${at}`);
    }

    // Split across pushes -> reassembled -> must not alias either chunk.
    const split = Buffer.from(frames[0]);
    const p1 = split.subarray(0, 8);
    const p2 = split.subarray(8);
    const framer2 = new Framer();
    assert.deepStrictEqual(framer2.push(p1), []);
    const [e] = framer2.push(p2);
    assert.deepStrictEqual(e, u8);
    assert.notStrictEqual(e.buffer, split.buffer);
    split.fill(0);
    assert.deepStrictEqual(e, u8, 'reassembled view owns its bytes');
    // and the framer's reassembly memory is not shared with the next frame
    const [g] = framer2.push(Buffer.concat([frames[0].subarray(0, 5)]));
    assert.strictEqual(g, undefined);
    const [h] = framer2.push(frames[0].subarray(5));
    assert.deepStrictEqual(h, u8);
    assert.deepStrictEqual(e, u8);
  });

  test('a split large frame (4 MiB Buffer) in 64 KiB pieces', T, () => {
    const c = corpus.build().find((x) => x.name === '4 MiB buffer');
    const frame = advanced.encode(c.value);
    const framer = new Framer();
    const out = [];
    for (let i = 0; i < frame.length; i += 65536) out.push(...framer.push(frame.subarray(i, i + 65536)));
    assert.strictEqual(out.length, 1);
    corpus.assertCase(c, out[0]);
  });

  const badPayload = Buffer.from([0xff, 0x0f, 0x5c, 0x02, 0x01, 0x00]);
  const badFrame = Buffer.concat([be32(badPayload.length), badPayload]);

  test('a bad frame in the middle: onError, neighbours still arrive in order', T, () => {
    const values = [{ n: 1 }, 'two', [3]];
    const chunk = Buffer.concat([advanced.encode(values[0]), badFrame,
      advanced.encode(values[1]), advanced.encode(values[2])]);
    const { errors, onError } = collectErrors();
    const framer = new Framer({ onError });
    assert.deepStrictEqual(framer.push(chunk), values);
    assert.strictEqual(errors.length, 1);
    assert.strictEqual(errors[0].code, 'ERR_PROCWIRE_BAD_HOST_TAG');
    // stream still in sync
    assert.deepStrictEqual(framer.push(advanced.encode(4)), [4]);

    // every split position of the same stream gives the same result
    for (let i = 0; i <= chunk.length; i++) {
      const sink = collectErrors();
      const f = new Framer({ onError: sink.onError });
      const out = [...f.push(chunk.subarray(0, i)), ...f.push(chunk.subarray(i))];
      assert.deepStrictEqual(out, values, `split ${i}`);
      assert.deepStrictEqual(sink.errors.map((e) => e.code), ['ERR_PROCWIRE_BAD_HOST_TAG'], `split ${i}`);
    }
  });

  test('without onError, push throws with the good messages attached', T, () => {
    const framer = new Framer();
    const chunk = Buffer.concat([advanced.encode(1), badFrame, advanced.encode(2)]);
    let err;
    try {
      framer.push(chunk);
    } catch (e) {
      err = e;
    }
    assert.ok(err, 'push must throw');
    assert.strictEqual(err.code, 'ERR_PROCWIRE_BAD_HOST_TAG');
    assert.deepStrictEqual(err.messages, [1, 2]);
    // a decode error is not fatal
    assert.deepStrictEqual(framer.push(advanced.encode(3)), [3]);

    // two bad frames -> one coded error carrying both
    const two = Buffer.concat([badFrame, advanced.encode('a'),
      Buffer.from('0000000400000000', 'hex'), advanced.encode('b')]);
    let err2;
    try {
      framer.push(two);
    } catch (e) {
      err2 = e;
    }
    assert.ok(err2);
    assert.match(err2.code, /^ERR_PROCWIRE_/);
    assert.deepStrictEqual(err2.messages, ['a', 'b']);
    const inner = err2.cause && err2.cause.errors;
    assert.ok(Array.isArray(inner) && inner.length === 2, 'both errors kept');
    for (const e of inner) assert.match(e.code, /^ERR_PROCWIRE_/);
  });

  test('a zero-length frame is a decode error, not a stall', T, () => {
    const { errors, onError } = collectErrors();
    const framer = new Framer({ onError });
    assert.deepStrictEqual(framer.push(Buffer.concat([be32(0), advanced.encode('after')])), ['after']);
    assert.deepStrictEqual(errors.map((e) => e.code), ['ERR_PROCWIRE_DECODE']);
  });

  test('every kind of bad payload is reported with its code', T, () => {
    const bad = [
      [Buffer.from('ff0f5c020100', 'hex'), 'ERR_PROCWIRE_BAD_HOST_TAG'],
      [Buffer.from('ff0f5c000e0100', 'hex'), 'ERR_PROCWIRE_BAD_VIEW_TYPE'],
      [Buffer.from('ff0f5c0005030102 03'.replace(/ /g, ''), 'hex'), 'ERR_PROCWIRE_BAD_VIEW_LENGTH'],
      [Buffer.from('ff104902', 'hex'), 'ERR_PROCWIRE_DECODE'],
      [Buffer.from('ff0f6f', 'hex'), 'ERR_PROCWIRE_DECODE'],
    ];
    const parts = [];
    for (const [p] of bad) parts.push(Buffer.concat([be32(p.length), p]), advanced.encode(parts.length));
    const { errors, onError } = collectErrors();
    const out = new Framer({ onError }).push(Buffer.concat(parts));
    assert.deepStrictEqual(out, [0, 2, 4, 6, 8]);
    assert.deepStrictEqual(errors.map((e) => e.code), bad.map((b) => b[1]));
  });

  test('length over maxMessageSize -> ERR_PROCWIRE_MESSAGE_TOO_LARGE, then fatal', T, () => {
    const ok = advanced.encode('x'.repeat(90));
    const max = ok.length - 4;
    const { errors, onError } = collectErrors();
    const framer = new Framer({ maxMessageSize: max, onError });
    assert.deepStrictEqual(framer.push(ok), ['x'.repeat(90)], 'exactly max is fine');
    const tooBig = advanced.encode('x'.repeat(91));
    const out = framer.push(Buffer.concat([advanced.encode('before'), tooBig, advanced.encode('after')]));
    assert.deepStrictEqual(out, ['before']);
    assert.deepStrictEqual(errors.map((e) => e.code), ['ERR_PROCWIRE_MESSAGE_TOO_LARGE']);
    assert.ok(errors[0] instanceof RangeError);
    assert.throws(() => framer.push(advanced.encode(1)), { code: 'ERR_PROCWIRE_MESSAGE_TOO_LARGE' });
    assert.throws(() => framer.push(Buffer.alloc(0)), { code: 'ERR_PROCWIRE_MESSAGE_TOO_LARGE' });

    // without onError: thrown, with the earlier messages attached
    const f2 = new Framer({ maxMessageSize: 16 });
    let err;
    try {
      f2.push(Buffer.concat([advanced.encode(1), be32(17), Buffer.alloc(17)]));
    } catch (e) {
      err = e;
    }
    assert.strictEqual(err && err.code, 'ERR_PROCWIRE_MESSAGE_TOO_LARGE');
    assert.deepStrictEqual(err.messages, [1]);
    assert.throws(() => f2.push(advanced.encode(2)), { code: 'ERR_PROCWIRE_MESSAGE_TOO_LARGE' });

    // header split across pushes
    const f3 = new Framer({ maxMessageSize: 16 });
    assert.deepStrictEqual(f3.push(be32(17).subarray(0, 3)), []);
    assert.throws(() => f3.push(be32(17).subarray(3)), { code: 'ERR_PROCWIRE_MESSAGE_TOO_LARGE' });
    assert.throws(() => f3.push(advanced.encode(2)), { code: 'ERR_PROCWIRE_MESSAGE_TOO_LARGE' });

    // maxMessageSize 0: every frame is too large
    const f4 = new Framer({ maxMessageSize: 0 });
    assert.throws(() => f4.push(advanced.encode(1)), { code: 'ERR_PROCWIRE_MESSAGE_TOO_LARGE' });
  });

  test('headers 0x7fffffff / 0x80000000 / 0x80000001 / 0xffffffff with the default max', T, () => {
    for (const h of [0x7fffffff, 0x80000000, 0x80000001, 0xffffffff]) {
      const framer = new Framer();
      assert.strictEqual(framer.maxMessageSize, 256 * 1024 * 1024);
      // header alone, header split, header with bytes behind it
      for (const pieces of [[be32(h)], [be32(h).subarray(0, 1), be32(h).subarray(1)],
        [Buffer.concat([advanced.encode('ok'), be32(h), Buffer.from('ffff', 'hex')])]]) {
        const { errors, onError } = collectErrors();
        const f = new Framer({ onError });
        const out = [];
        for (const p of pieces) out.push(...f.push(p));
        assert.deepStrictEqual(out, pieces.length === 1 && pieces[0].length > 4 ? ['ok'] : [], `0x${h.toString(16)}`);
        assert.deepStrictEqual(errors.map((e) => e.code), ['ERR_PROCWIRE_MESSAGE_TOO_LARGE'], `0x${h.toString(16)}`);
        assert.match(errors[0].message, new RegExp(String(h)));
        assert.throws(() => f.push(advanced.encode(1)), { code: 'ERR_PROCWIRE_MESSAGE_TOO_LARGE' });
      }
      void framer;
    }
  });

  test('headers 0x7fffffff / 0xffffffff under maxMessageSize 0xffffffff keep buffering', T, () => {
    for (const h of [0x7fffffff, 0x80000000, 0xffffffff]) {
      const { errors, onError } = collectErrors();
      const f = new Framer({ maxMessageSize: 0xffffffff, onError });
      assert.deepStrictEqual(f.push(Buffer.concat([advanced.encode('first'), be32(h), Buffer.alloc(100)])), ['first']);
      assert.strictEqual(f.buffering, 104, `0x${h.toString(16)}`);
      assert.deepStrictEqual(f.push(Buffer.alloc(1000)), []);
      assert.strictEqual(f.buffering, 1104);
      assert.deepStrictEqual(errors, []);
    }
    assert.throws(() => new Framer({ maxMessageSize: 0x100000000 }), { code: 'ERR_PROCWIRE_INVALID_ARG' });
  });

  test('argument validation', T, () => {
    const f = new Framer();
    for (const bad of ['str', [1], null, undefined, new ArrayBuffer(4), 5]) {
      assert.throws(() => f.push(bad), { code: 'ERR_PROCWIRE_INVALID_ARG' });
    }
    assert.throws(() => new Framer({ serialization: 'xml' }), { code: 'ERR_PROCWIRE_INVALID_ARG' });
    assert.throws(() => new Framer({ maxMessageSize: -1 }), { code: 'ERR_PROCWIRE_INVALID_ARG' });
    assert.throws(() => new Framer({ maxMessageSize: 1.5 }), { code: 'ERR_PROCWIRE_INVALID_ARG' });
    assert.throws(() => new Framer({ onError: 1 }), { code: 'ERR_PROCWIRE_INVALID_ARG' });
    assert.throws(() => new Framer(5), { code: 'ERR_PROCWIRE_INVALID_ARG' });
    // push() accepts any view kind
    const frame = advanced.encode({ a: 1 });
    const ab = new ArrayBuffer(frame.length + 8);
    new Uint8Array(ab, 8).set(frame);
    assert.deepStrictEqual(new Framer().push(new DataView(ab, 8, frame.length)), [{ a: 1 }]);
  });
});

describe('json framer', () => {
  const jsonCases = () => corpus.build().filter((c) => c.json && !c.large && !c.cleanup);

  test('many lines in one chunk, and every split position', T, () => {
    const cases = jsonCases();
    const chunk = Buffer.concat(cases.map((c) => json.encode(c.value)));
    const expected = cases.map(corpus.jsonExpected);
    const f = new Framer({ serialization: 'json' });
    assert.deepStrictEqual(f.push(chunk), expected);
    assert.strictEqual(f.buffering, 0);

    const few = Buffer.concat([{ a: 'x\u00e9\u{1F600}' }, [1, 'two'], 'line', 3].map((v) => json.encode(v)));
    const fewExpected = [{ a: 'x\u00e9\u{1F600}' }, [1, 'two'], 'line', 3];
    for (let i = 0; i <= few.length; i++) {
      const fr = new Framer({ serialization: 'json' });
      const out = [...fr.push(few.subarray(0, i)), ...fr.push(few.subarray(i))];
      assert.deepStrictEqual(out, fewExpected, `split ${i}`);
      assert.strictEqual(fr.buffering, 0);
    }
  });

  test('a multibyte UTF-8 character split across chunks', T, () => {
    for (const ch of ['\u00e9', '\u4e2d', '\u{1F600}']) {
      const line = Buffer.from(JSON.stringify({ s: `a${ch}b` }) + '\n', 'utf8');
      const at = line.indexOf(Buffer.from(ch, 'utf8'));
      const width = Buffer.byteLength(ch);
      for (let cut = at + 1; cut < at + width; cut++) {
        const f = new Framer({ serialization: 'json' });
        assert.deepStrictEqual(f.push(line.subarray(0, cut)), []);
        assert.strictEqual(f.buffering, cut);
        assert.deepStrictEqual(f.push(line.subarray(cut)), [{ s: `a${ch}b` }], `${ch} cut ${cut}`);
      }
      // byte by byte
      const f = new Framer({ serialization: 'json' });
      const out = [];
      for (let i = 0; i < line.length; i++) out.push(...f.push(line.subarray(i, i + 1)));
      assert.deepStrictEqual(out, [{ s: `a${ch}b` }]);
    }
  });

  test('a bad line in the middle: neighbours still arrive in order', T, () => {
    const chunk = Buffer.from('{"a":1}\n{bad\n"two"\n\n[3]\n', 'utf8');
    const { errors, onError } = collectErrors();
    const f = new Framer({ serialization: 'json', onError });
    assert.deepStrictEqual(f.push(chunk), [{ a: 1 }, 'two', [3]]);
    assert.ok(errors.length >= 1);
    assert.strictEqual(errors[0].code, 'ERR_PROCWIRE_DECODE');
    for (const e of errors) assert.strictEqual(e.code, 'ERR_PROCWIRE_DECODE');
    let err;
    try {
      new Framer({ serialization: 'json' }).push(Buffer.from('1\nnope\n2\n'));
    } catch (e) {
      err = e;
    }
    assert.strictEqual(err && err.code, 'ERR_PROCWIRE_DECODE');
    assert.deepStrictEqual(err.messages, [1, 2]);
  });

  test('a line longer than maxMessageSize is fatal', T, () => {
    const { errors, onError } = collectErrors();
    const f = new Framer({ serialization: 'json', maxMessageSize: 10, onError });
    assert.deepStrictEqual(f.push(Buffer.from('"123456"\n"12345678')), ['123456']);
    assert.deepStrictEqual(errors, []);
    assert.deepStrictEqual(f.push(Buffer.from('"\n')), ['12345678'], 'exactly 10 bytes is fine');
    assert.deepStrictEqual(f.push(Buffer.from('"12345678')), []);
    f.push(Buffer.from('9"'));
    assert.deepStrictEqual(errors.map((e) => e.code), ['ERR_PROCWIRE_MESSAGE_TOO_LARGE']);
    assert.throws(() => f.push(Buffer.from('1\n')), { code: 'ERR_PROCWIRE_MESSAGE_TOO_LARGE' });
    // an unterminated line in one chunk
    const g = new Framer({ serialization: 'json', maxMessageSize: 4 });
    assert.throws(() => g.push(Buffer.from('1\n123456')), (e) => e.code === 'ERR_PROCWIRE_MESSAGE_TOO_LARGE' &&
      e.messages.length === 1 && e.messages[0] === 1);
  });
});
