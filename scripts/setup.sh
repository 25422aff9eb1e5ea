#!/usr/bin/env bash
# Everything procwire's tests and benchmarks need on a fresh Debian machine,
# idempotently:
#   - Debian packages: clang + libclang-rt (libFuzzer, sanitizers), cmake and
#     GoogleTest (native unit tests), clang-format (format check), redis-server (a benchmark peer),
#     nats-server (the NATS transport's tests and benchmark peer);
#   - the other supported Node lines (22, 24, 26) from the npm registry;
#   - the addon built for this machine's Node (npm install);
#   - with --bench: the benchmark's npm peers (zeromq) in a private prefix,
#     .bench-deps/, so they are no dependency of procwire itself, and the
#     addon built for the newest Node line (.build/node26/), which the pool
#     suite runs procwire on.
# Installing Debian packages needs root; without it, what is missing is named
# and the parts that need it say so when they run.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
bench=0
[ "${1:-}" = --bench ] && bench=1

need=()
command -v clang++ >/dev/null 2>&1 || need+=(clang)
ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1 || need+=(libclang-rt-14-dev)
command -v cmake >/dev/null 2>&1 || need+=(cmake)
command -v clang-format >/dev/null 2>&1 || need+=(clang-format)
[ -f /usr/src/googletest/CMakeLists.txt ] || [ -f /usr/lib/x86_64-linux-gnu/libgtest.a ] || need+=(googletest libgtest-dev)
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v nats-server >/dev/null 2>&1 || need+=(nats-server)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing ${need[*]}"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
  else
    echo "setup: missing Debian packages (need root to install): ${need[*]}" >&2
  fi
fi

if [ "${PROCWIRE_SKIP_NODES:-0}" != 1 ]; then
  bash "$root/scripts/setup-nodes.sh"
fi

if [ ! -f "$root/build/Release/procwire.node" ] || [ ! -d "$root/node_modules" ]; then
  npm install --no-audit --no-fund
fi

# Benchmark-only npm peers, pinned here, installed once into .bench-deps/
# (bench/lib/transports.js and bench/pool.js resolve them from there). A
# failure only costs the bench those rows, which then say why they were
# skipped. The pool suite's peers: piscina, tinypool, workerpool, jest-worker.
BENCH_PEERS=(zeromq@6.8.0 piscina@5.3.2 tinypool@2.2.0 workerpool@10.0.3 jest-worker@30.5.1)
bench_peers_missing=0
for peer in "${BENCH_PEERS[@]}"; do
  name=${peer%@*}
  version=${peer##*@}
  installed=$(node -p "try { require('$root/.bench-deps/node_modules/$name/package.json').version } catch { '' }" 2>/dev/null)
  [ "$installed" = "$version" ] || bench_peers_missing=1
done
if [ "$bench" = 1 ] && [ "$bench_peers_missing" = 1 ]; then
  mkdir -p "$root/.bench-deps"
  [ -f "$root/.bench-deps/package.json" ] || echo '{"private": true}' > "$root/.bench-deps/package.json"
  echo "setup: installing benchmark peers (${BENCH_PEERS[*]}) into .bench-deps/"
  npm install --prefix "$root/.bench-deps" --no-audit --no-fund --no-package-lock "${BENCH_PEERS[@]}" >/dev/null ||
    echo "setup: could not install ${BENCH_PEERS[*]}; the bench skips the rows that need them" >&2
fi

# The tools bench/tools.js runs (plain against procwire/register), pinned,
# installed once into the same private prefix; a failure costs their rows.
BENCH_TOOLS=(jest-worker@30.5.1 workerpool@10.0.3 tinypool@2.2.0 jest@30.5.1 vitest@4.1.12)
if [ "$bench" = 1 ] && [ "$(cat "$root/.bench-deps/.tools" 2>/dev/null)" != "${BENCH_TOOLS[*]}" ]; then
  mkdir -p "$root/.bench-deps"
  [ -f "$root/.bench-deps/package.json" ] || echo '{"private": true}' > "$root/.bench-deps/package.json"
  echo "setup: installing the tools bench's tools (${BENCH_TOOLS[*]}) into .bench-deps/"
  if npm install --prefix "$root/.bench-deps" --no-audit --no-fund --no-package-lock "${BENCH_TOOLS[@]}" >/dev/null; then
    echo "${BENCH_TOOLS[*]}" > "$root/.bench-deps/.tools"
  else
    echo "setup: could not install ${BENCH_TOOLS[*]}; the tools bench skips their rows" >&2
  fi
fi

# The start bundle a native child runs (scripts/build-start-bundle.js), made
# when missing or out of date: `npm install` builds only the addon, and the
# bench's forks should start as a built checkout's do.
if [ "$bench" = 1 ] && [ -f "$root/build/Release/procwire.node" ]; then
  node "$root/scripts/build-start-bundle.js" ||
    echo "setup: could not make the start bundle; children start from lib/ one file at a time" >&2
fi

# The pool suite runs every pool on the newest Node line, procwire's rows
# with the addon built for that line (bench/lib/harness.js procwireOn()),
# and their children with that line's code cache for the start bundle.
newest=26
if [ "$bench" = 1 ] && [ -x "$root/.nodes/$newest/bin/node" ]; then
  if bash "$root/scripts/build-for.sh" "$newest"; then
    PROCWIRE_ADDON="$root/.build/node$newest/build/Release/procwire.node" \
      "$root/.nodes/$newest/bin/node" "$root/scripts/build-start-bundle.js" ||
      echo "setup: could not make the start bundle's code cache for Node $newest" >&2
  else
    echo "setup: could not build the addon for Node $newest; the pool suite runs procwire's rows on this machine's Node" >&2
  fi
fi
