{
  "targets": [
    {
      "target_name": "procwire",
      "sources": [
        "src/core/frame_reader.cc",
        "src/core/inbound.cc",
        "src/core/write_queue.cc",
        "src/core/socket_io.cc",
        "src/core/shm.cc",
        "src/core/v8_scan.cc",
        "src/binding/codec.cc",
        "src/binding/codec_advanced.cc",
        "src/binding/codec_transfers.cc",
        "src/binding/codec_natives.cc",
        "src/binding/addon_data.cc",
        "src/binding/handle_wrap.cc",
        "src/binding/payload_memory.cc",
        "src/binding/functions.cc",
        "src/binding/framer_wrap.cc",
        "src/binding/native_channel.cc",
        "src/binding/channel_writer.cc",
        "src/binding/channel_reader.cc",
        "src/binding/message_batch.cc",
        "src/binding/ring_side.cc",
        "src/binding/segment_side.cc",
        "src/binding/socket_spin.cc",
        "src/binding/native_listener.cc",
        "src/core/ring_link.cc",
        "src/core/ring.cc",
        "src/core/wake.cc",
        "src/binding/segments.cc",
        "src/binding/addon.cc"
      ],
      "cflags_cc": ["-O2", "-fno-strict-aliasing", "-Wall", "-Wextra", "-Wno-unused-parameter", "-Wno-cast-function-type",
                    "-fvisibility=hidden", "-fvisibility-inlines-hidden", "-ffunction-sections", "-fdata-sections"],
      "ldflags": ["-Wl,--gc-sections", "-Wl,-O1", "-Wl,--as-needed"],
      "cflags_cc!": ["-fno-exceptions"],
      "cflags!": ["-fno-exceptions"],
      "defines": ["NODE_WANT_INTERNALS=0"]
    }
  ]
}
