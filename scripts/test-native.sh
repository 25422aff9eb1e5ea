#!/usr/bin/env bash
# Builds and runs the native tests for src/core, idempotently, from any cwd:
#   1. the GoogleTest suite in test/cpp, under AddressSanitizer + UBSan;
#   2. the libFuzzer targets fuzz/framer_fuzz.cc, fuzz/ring_fuzz.cc and
#      fuzz/inbound_fuzz.cc, each for FUZZ_SECONDS (default 30; 0 only
#      replays the seed corpus) on a scratch copy of its corpus, so the
#      committed corpus never grows.
# Everything is built in build-cpp/ at the repository root. Exits non-zero
# on any build failure, test failure, sanitizer report or fuzzer crash.
#
#   scripts/test-native.sh
#   FUZZ_SECONDS=300 scripts/test-native.sh
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$root/build-cpp"
fuzz_seconds="${FUZZ_SECONDS:-30}"
case "$fuzz_seconds" in
  ''|*[!0-9]*) echo "test-native: FUZZ_SECONDS must be a whole number of seconds" >&2; exit 2 ;;
esac

die() { echo "test-native: $*" >&2; exit 1; }

# ---- tools ------------------------------------------------------------------

command -v cmake >/dev/null || die "cmake is required"

# The fuzzer needs clang with its runtime libraries; try to install them when
# we are root, since a missing libclang-rt package is the usual cause.
install_clang() {
  if [ "$(id -u)" -ne 0 ]; then
    return 1
  fi
  echo "test-native: installing clang and its fuzzer runtime with apt-get"
  command -v apt-get >/dev/null || return 1
  apt-get install -y "$@" >/dev/null || { apt-get update >/dev/null && apt-get install -y "$@" >/dev/null; }
}

if ! command -v clang++ >/dev/null; then
  install_clang clang libclang-rt-14-dev ||
    die "clang++ not found; install clang and libclang-rt-14-dev (needs root)"
fi

# Links a trivial fuzz target to prove -fsanitize=fuzzer works.
fuzzer_links() {
  local probe
  probe="$(mktemp -d)"
  printf '%s\n' '#include <cstdint>' '#include <cstddef>' \
    'extern "C" int LLVMFuzzerTestOneInput(const uint8_t*, size_t) { return 0; }' \
    >"$probe/p.cc"
  local ok=0
  clang++ -fsanitize=fuzzer,address,undefined "$probe/p.cc" -o "$probe/p" 2>"$probe/err" || ok=1
  [ $ok -eq 0 ] || cat "$probe/err" >&2
  rm -rf "$probe"
  return $ok
}

if ! fuzzer_links; then
  major="$(clang++ --version | sed -n 's/.*clang version \([0-9]*\).*/\1/p' | head -n1)"
  install_clang "libclang-rt-${major:-14}-dev" && fuzzer_links ||
    die "clang++ cannot link -fsanitize=fuzzer; install libclang-rt-${major:-14}-dev (needs root)"
fi

# ---- unit tests -----------------------------------------------------------

echo "== building unit tests in $build"
configure=(cmake -S "$root/test/cpp" -B "$build" -DPROCWIRE_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug)
# A build directory remembers its generator; only choose one for a new one.
if [ ! -f "$build/CMakeCache.txt" ] && command -v ninja >/dev/null; then
  configure+=(-G Ninja)
fi
"${configure[@]}" >/dev/null
cmake --build "$build" --parallel

echo "== running unit tests (ASan + UBSan)"
# halt_on_error makes any UBSan report fatal; detect_leaks is the default on
# Linux but is spelled out because leaks count as failures here.
ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:${ASAN_OPTIONS:-}" \
UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}" \
  timeout 600 "$build/procwire_core_tests" --gtest_color=no

# ---- fuzzers ----------------------------------------------------------------

fuzz_dir="$build/fuzz"
mkdir -p "$fuzz_dir/artifacts"

# run_fuzzer <name> <what it fuzzes> <sources...>: builds fuzz/<name>_fuzz.cc
# with the given core sources and runs it on a scratch copy of
# fuzz/corpus/<name>/ for FUZZ_SECONDS (each fuzzer gets the full time).
run_fuzzer() {
  local name="$1" what="$2"
  shift 2
  local bin="$fuzz_dir/${name}_fuzz"
  echo "== building fuzzer $bin"
  clang++ -std=c++17 -O1 -g -Wall -Wextra -fno-omit-frame-pointer \
    -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
    -I"$root/src/core" \
    "$root/fuzz/${name}_fuzz.cc" "$@" \
    -o "$bin"

  # A scratch copy, refreshed each run: new inputs land here, not in fuzz/.
  local work_corpus="$fuzz_dir/corpus-$name"
  rm -rf "$work_corpus"
  mkdir -p "$work_corpus"
  cp "$root/fuzz/corpus/$name/"* "$work_corpus/"

  local log="$fuzz_dir/$name-fuzz.log"
  local status=0
  if [ "$fuzz_seconds" -eq 0 ]; then
    echo "== replaying the $name seed corpus (FUZZ_SECONDS=0)"
    "$bin" -print_final_stats=1 "$work_corpus"/* >"$log" 2>&1 || status=$?
  else
    echo "== fuzzing $what for ${fuzz_seconds}s"
    # The outer timeout is a backstop in case the fuzzer wedges.
    timeout $((fuzz_seconds + 120)) "$bin" \
      -max_total_time="$fuzz_seconds" -timeout=10 -rss_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix="$fuzz_dir/artifacts/" \
      "$work_corpus" >"$log" 2>&1 || status=$?
  fi
  if [ $status -ne 0 ]; then
    tail -n 60 "$log" >&2
    die "$name fuzzer failed (exit $status); full log in $log, crashing inputs in $fuzz_dir/artifacts/"
  fi
  local execs
  execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n1)"
  echo "$name fuzzer: ${execs:-?} executions, corpus $(ls "$work_corpus" | wc -l) inputs (log: $log)"
}

run_fuzzer framer "FrameReader and the V8 payload scan" "$root/src/core/frame_reader.cc" "$root/src/core/v8_scan.cc"
run_fuzzer ring "the shared-memory ring's reader and writer" "$root/src/core/ring.cc"
run_fuzzer inbound "the inbound control protocol and descriptor queue" "$root/src/core/inbound.cc" \
  "$root/src/core/frame_reader.cc" "$root/src/core/socket_io.cc" "$root/src/core/shm.cc"

echo "== native tests passed"
