'use strict';
// The protocol's constants are defined once per language; this checks that
// the C++ and JavaScript copies agree and that docs/protocol.md names every
// control message and tag.
const test = require('node:test');
const assert = require('node:assert');
const fs = require('fs');
const path = require('path');
const protocol = require('../lib/protocol');

const root = path.join(__dirname, '..');
const header = fs.readFileSync(path.join(root, 'src/core/protocol.h'), 'utf8');
const doc = fs.readFileSync(path.join(root, 'docs/protocol.md'), 'utf8');

function cppConstant(name) {
  const m = header.match(new RegExp(`constexpr\\s+\\w+\\s+${name}\\s*=\\s*([^;]+);`));
  assert.ok(m, `${name} is defined in src/core/protocol.h`);
  // Evaluates simple integer expressions such as 0xFE or 256u * 1024u.
  return Function(`return (${m[1].replace(/(\d)u\b/g, '$1')});`)();
}

test('C++ and JavaScript protocol numbers agree', () => {
  assert.strictEqual(cppConstant('kHostTagView'), protocol.HOST_TAG.VIEW);
  assert.strictEqual(cppConstant('kHostTagOther'), protocol.HOST_TAG.OTHER);
  assert.strictEqual(cppConstant('kHostTagSegmentView'), protocol.HOST_TAG.SEGMENT_VIEW);
  assert.strictEqual(cppConstant('kSegmentsControlByte'), protocol.SEGMENTS_CONTROL_BYTE);
  assert.strictEqual(cppConstant('kMaxSegmentsPerFrame'), protocol.MAX_SEGMENTS_PER_FRAME);
  assert.strictEqual(cppConstant('kPooledSegmentsControlByte'), protocol.POOLED_SEGMENTS_CONTROL_BYTE);
  assert.strictEqual(cppConstant('kSegmentEntrySize'), protocol.SEGMENT_ENTRY_SIZE);
  assert.strictEqual(cppConstant('kSegmentSealed'), protocol.SEGMENT_KIND.SEALED);
  assert.strictEqual(cppConstant('kSegmentPooledNew'), protocol.SEGMENT_KIND.POOLED_NEW);
  assert.strictEqual(cppConstant('kSegmentPooled'), protocol.SEGMENT_KIND.POOLED);
  assert.strictEqual(cppConstant('kDefaultMaxMessageSize'), protocol.DEFAULT_MAX_MESSAGE_SIZE);
});

test('docs/protocol.md documents every internal message', () => {
  for (const cmd of Object.values(protocol.CMD)) {
    assert.ok(doc.includes(`\`${cmd}\``), `${cmd} is documented`);
  }
  assert.ok(doc.includes(protocol.NATS_CONTROL_HEADER) && doc.includes(protocol.NATS_ERROR_HEADER));
});

test('isInternal routes NODE_* commands only', () => {
  assert.strictEqual(protocol.isInternal({ cmd: 'NODE_HANDLE' }), true);
  assert.strictEqual(protocol.isInternal({ cmd: 'NODE_' }), false);
  assert.strictEqual(protocol.isInternal({ cmd: 'node_handle' }), false);
  assert.strictEqual(protocol.isInternal({ cmd: 42 }), false);
  assert.strictEqual(protocol.isInternal(null), false);
  assert.strictEqual(protocol.isInternal('NODE_HANDLE'), false);
});
