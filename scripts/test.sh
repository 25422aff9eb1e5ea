#!/usr/bin/env bash
# The whole test suite (npm test): lint and format checks, native unit tests and fuzzing under
# sanitizers, then the JavaScript suites on every supported Node line
# (20 = this machine's node, 22, 24 and 26 from the npm registry).
#
#   PROCWIRE_NODES="20 24"   only these lines
#   FUZZ_SECONDS=30          fuzzing time per target
#   TEST_FILE_SECONDS=600    time limit of one test file on one Node line
#   CACHE_SECONDS=2400       time limit of the cold toolchain and prebuilt-addon step
#   FAULT_RUN_SECONDS=600    time limit of the NATS fault run (test/fault/, once)
#   FAULT_REQUESTS=100000    requests in that run
#
# Each test file runs in its own `node --test` under `timeout`, so a file that
# hangs (a child or server left holding its event loop) fails by name within
# the limit instead of stalling the run; timeout signals the file's whole
# process group, its children included.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

bash scripts/setup.sh || { echo "setup failed"; exit 1; }

passed=0
failed=0
status=0
# What failed, by name, for the summary at the end: a run's log is long, and
# what a reader (or a CI page showing only its tail) needs is which test.
failures="$(mktemp)"
trap 'rm -f "$failures"' EXIT

# Notes the failing tests of one node:test run (the spec reporter's list
# after "✖ failing tests:") under what ran them.
note_failures() {
  local log="$1" what="$2"
  {
    echo "$what"
    awk '/^✖ failing tests:/ { on = 1; next } on && /^ *✖ / { sub(/^ */, "  "); print }' "$log" | sort -u
  } >> "$failures"
}

# Adds the counts of one node:test run (spec reporter lines "ℹ pass N").
count() {
  local log="$1" p f
  p=$(grep -E '^ℹ pass [0-9]+' "$log" | tail -1 | awk '{print $3}')
  f=$(grep -E '^ℹ fail [0-9]+' "$log" | tail -1 | awk '{print $3}')
  passed=$((passed + ${p:-0}))
  failed=$((failed + ${f:-0}))
}

echo "== lint: ESLint and clang-format =="
if bash scripts/lint.sh; then passed=$((passed + 1)); else failed=$((failed + 1)); status=1; echo "lint" >> "$failures"; fi

echo "== native: GoogleTest under ASan/UBSan, libFuzzer =="
if [ -f scripts/test-native.sh ]; then
  if bash scripts/test-native.sh; then passed=$((passed + 1)); else failed=$((failed + 1)); status=1; echo "native tests or fuzzing" >> "$failures"; fi
fi

# The tests' cold work, cached for the next run and given its own budget
# here instead of inside a test's: the type test's TypeScript toolchains, and
# the package test's zig toolchain, other lines' headers, the eight
# cross-built addons (scripts/prebuild.sh, stamped per addon), the arm64
# node and the npm 11 / pnpm 10 it installs with. Warm, it takes seconds;
# cold it took 1839 s on a 2-core machine under a load average of 15-20
# (other jobs beside it), hence the budget (CACHE_SECONDS overrides it).
echo "== caches: toolchains and prebuilt addons the tests use =="
if timeout --kill-after=10 "${CACHE_SECONDS:-2400}" bash -c '
    bash scripts/setup-types.sh &&
    bash scripts/prebuild.sh >/dev/null && rm -rf prebuilds &&
    bash scripts/setup-toolchain.sh arm64 20 >/dev/null &&
    npm exec --yes --package=npm@11 -- npm --version >/dev/null &&
    npm exec --yes --package=pnpm@10 -- pnpm --version >/dev/null'; then
  passed=$((passed + 1))
else
  echo "✖ caches: a toolchain or prebuilt addon could not be set up within ${CACHE_SECONDS:-2400} s"
  echo "caches" >> "$failures"
  failed=$((failed + 1)); status=1
fi

lines="${PROCWIRE_NODES:-20 22 24 26}"
for major in $lines; do
  if [ "$major" = 20 ]; then
    node_bin="$(command -v node)"
    addon="$root/build/Release/procwire.node"
    [ -f "$addon" ] || npm run build >/dev/null
  else
    node_bin="$root/.nodes/$major/bin/node"
    if ! bash scripts/build-for.sh "$major"; then
      echo "the addon for Node $major" >> "$failures"
      failed=$((failed + 1)); status=1; continue
    fi
    addon="$root/.build/node$major/build/Release/procwire.node"
  fi
  # The start bundle a native child runs (scripts/build-start-bundle.js),
  # made if missing or out of date, and this line's code cache for it; the
  # suites then fork children the way a built checkout does.
  if ! PROCWIRE_ADDON="$addon" "$node_bin" scripts/build-start-bundle.js; then
    echo "✖ the start bundle could not be made on Node $major"
    echo "the start bundle on Node $major" >> "$failures"
    failed=$((failed + 1)); status=1
  fi
  echo "== JavaScript suites on $("$node_bin" --version) =="
  for file in test/*.test.js; do
    log="$(mktemp)"
    PROCWIRE_ADDON="$addon" PATH="$(dirname "$node_bin"):$PATH" \
      timeout --kill-after=10 "${TEST_FILE_SECONDS:-600}" \
      "$node_bin" --test --test-reporter=spec "$file" 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    count "$log"
    [ "$rc" = 0 ] || note_failures "$log" "$file on Node $major (exit $rc)"
    rm -f "$log"
    if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
      echo "✖ $file did not finish within ${TEST_FILE_SECONDS:-600} s on Node $major"
      failed=$((failed + 1))
    fi
    [ "$rc" = 0 ] || status=1
  done
done

# The NATS fault run (test/fault/): 100k durable requests and the same run on
# core NATS over a 3-server JetStream cluster, with workers and a server
# killed. Heavy, so once, on this machine's Node, within its own budget.
echo "== NATS fault run (once, on $(node --version)) =="
[ -f "$root/build/Release/procwire.node" ] || npm run build >/dev/null
log="$(mktemp)"
PROCWIRE_ADDON="$root/build/Release/procwire.node" \
  timeout --kill-after=10 "${FAULT_RUN_SECONDS:-600}" \
  node --test --test-reporter=spec test/fault/*.test.js 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
count "$log"
[ "$rc" = 0 ] || note_failures "$log" "test/fault/ on $(node --version) (exit $rc)"
rm -f "$log"
if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
  echo "✖ the NATS fault run did not finish within ${FAULT_RUN_SECONDS:-600} s"
  failed=$((failed + 1))
fi
[ "$rc" = 0 ] || status=1

# Tools that fork (jest-worker, workerpool, tinypool, mocha --parallel), and
# the own test suites of workerpool 3 (run by its mocha, by mocha --parallel
# and by jest -w 2), worker-farm and recluster, plain and with
# procwire/register: once, on Node 20, installs cached in .test-deps/.
echo "== tool suites: plain against NODE_OPTIONS=--require procwire/register (Node 20) =="
if timeout --kill-after=10 "${TOOL_SUITES_SECONDS:-900}" bash scripts/tool-suites.sh; then
  passed=$((passed + 1))
else
  echo "✖ tool suites failed or did not finish within ${TOOL_SUITES_SECONDS:-900} s"
  echo "tool suites (scripts/tool-suites.sh)" >> "$failures"
  failed=$((failed + 1))
  status=1
fi

echo
if [ -s "$failures" ]; then
  echo "== what failed =="
  cat "$failures"
  echo
fi
echo "procwire: $passed passed, $failed failed"
exit $status
