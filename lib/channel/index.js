'use strict';
// lib/channel/: Channel and its collaborators (docs/internals.md).

const { Channel } = require('./channel');
const { channelSettings, DEFAULT_HIGH_WATER_MARK, DEFAULT_REQUEST_TIMEOUT, DEFAULT_OUT_OF_LINE_THRESHOLD } =
  require('./settings');
const symbols = require('./symbols');

module.exports = {
  Channel, channelSettings, DEFAULT_HIGH_WATER_MARK, DEFAULT_REQUEST_TIMEOUT, DEFAULT_OUT_OF_LINE_THRESHOLD, symbols,
};
