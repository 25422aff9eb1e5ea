#!/usr/bin/env bash
# The OWN test suites of libraries that fork, as their authors wrote them and
# as the npm registry ships them, each run plain and with
# NODE_OPTIONS="--require <root>/lib/register.js", on this machine's Node.
# Called by scripts/tool-suites.sh (one section of scripts/test.sh, one time
# budget). Fails naming each test that passes plainly and fails with the hook,
# a suite that does not finish within its budget, and a hooked run in which
# no fork, or none of a runner's own workers, went through procwire (it would
# prove nothing). Tests that fail plainly too (suites written for older Node
# lines) are listed, not hidden.
#
# Only these versions ship their tests in the registry (later ones publish
# their build only), so these are pinned; each library, with the test runner
# its suite was written for, goes into its own private prefix
# .test-deps/libraries/NAME/ (installed once; never a procwire dependency).
# Two popular runners that fork their own workers run workerpool 3.1.2's
# suite too: mocha --parallel (through workerpool 9, child_process.fork) and
# jest -w 2 (through jest-worker, child_process.fork); their workers and the
# suite's forks inside them all go through the hook.
#
#   LIBRARY_SUITE_SECONDS=150   time limit of one run of one suite
#   LIBRARY_SUITES=worker-farm@1.7.0   run only these (space-separated)
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

# name (also its prefix's) | packages to install | package directory | report
# format (tap on stdout, or jest: the --json file written to $SUITE_REPORT) |
# command run in it | a runner's own worker script (a regular expression:
# when given, those forks must go through procwire too, not only the suite's)
# | tests run and reported but not compared (a regular expression) because
# they measure the machine: worker-farm asserts that a worker's pid is within
# 750 of its parent's, true only where few other processes start meanwhile
# (on a shared machine, the longer a run, the likelier it fails), and that a
# 50 ms call returns within a 250 ms limit that includes its worker's
# start; recluster that its second worker listens within 100 ms of its
# first. A hooked process's first fork loads procwire (tens of ms on a
# loaded machine), so those fail with the hook in some runs and plainly in
# others (docs/adoption.md). recluster's tap 0.4 also names a test that
# hangs past its 30 s limit "Timeout!": its "IPC-disconnecting server" test
# hung so in 1 of 3 plain runs here, and in hooked runs as often.
libraries=(
  "workerpool@3.1.2|workerpool@3.1.2 mocha@2.5.3|workerpool|tap|node ../mocha/bin/_mocha test --timeout 10000 --reporter tap||"
  "mocha@11.7.5|workerpool@3.1.2 mocha@11.7.5|workerpool|tap|node ../mocha/bin/mocha.js test --parallel --jobs 2 --timeout 10000 --reporter tap|/mocha/lib/nodejs/worker\\.js|"
  "jest@30.5.2|workerpool@3.1.2 jest@30.5.2|workerpool|jest|node ../jest/bin/jest.js --ci --no-watchman -w 2 --config \"\$SUITE_TMP/jest.config.js\" --json --outputFile \"\$SUITE_REPORT\"|/jest-worker/build/processChild\\.js|"
  "worker-farm@1.7.0|worker-farm@1.7.0 tape@4.10.2|worker-farm|tap|node tests/|| › pid makes sense|(^|› )call timeout test › "
  "recluster@1.0.0|recluster@1.0.0 tap@0.4.13|recluster|tap|node test/index.js; node test/termination.js||2 workers serving requests| › Timeout!\$"
)

budget="${LIBRARY_SUITE_SECONDS:-150}"
status=0

# Installs one library and its runner into its own prefix, once per pin set.
install() {
  local name="$1" pins="$2" prefix="$root/.test-deps/libraries/$1"
  [ "$(cat "$prefix/.installed" 2>/dev/null)" = "$pins" ] && return 0
  mkdir -p "$prefix"
  echo '{ "private": true }' > "$prefix/package.json"
  # shellcheck disable=SC2086
  if ! npm install --prefix "$prefix" --no-audit --no-fund --ignore-scripts --no-save $pins >/dev/null; then
    echo "✖ library suites: could not install $pins into .test-deps/libraries/$name/"
    return 1
  fi
  echo "$pins" > "$prefix/.installed"
}

# jest runs workerpool 3.1.2's mocha suite as it is: its test files are in a
# package under node_modules, which jest skips unless told, and mocha's
# before/after hooks are jest's beforeAll/afterAll. The suite's own timeout
# (its package.json runs mocha with --timeout 10000) and a fresh cache per run.
write_jest_config() {
  local tmp="$1"
  echo 'globalThis.before = beforeAll; globalThis.after = afterAll;' > "$tmp/mocha-hooks.js"
  cat > "$tmp/jest.config.js" <<'EOF'
module.exports = {
  rootDir: process.cwd(),
  testMatch: ['<rootDir>/test/*.js'],
  testPathIgnorePatterns: [],
  haste: { retainAllFiles: true },
  setupFilesAfterEnv: [`${__dirname}/mocha-hooks.js`],
  cacheDirectory: `${process.env.SUITE_REPORT}.cache`,
  testTimeout: 10000,
};
EOF
}

# Runs one suite once; its report (stdout, or the file a jest command writes
# to $SUITE_REPORT) and stderr go to separate files. Prints the exit status,
# 124 when the budget ran out.
run() {
  local dir="$1" command="$2" options="$3" out="$4" err="$5" format="$6" stdout="$4"
  [ "$format" = jest ] && stdout="$out.stdout"
  (
    cd "$dir" || exit 1
    SUITE_REPORT="$out" SUITE_TMP="$(dirname "$out")" \
      NODE_OPTIONS="$options" NODE_DEBUG="${options:+procwire_register}" \
      timeout --kill-after=10 "$budget" bash -c "$command" > "$stdout" 2> "$err"
  )
  echo $?
}

for entry in "${libraries[@]}"; do
  IFS='|' read -r name pins package format command runnerWorker notCompared <<< "$entry"
  export SUITE_NOT_COMPARED="$notCompared"
  [ -n "${LIBRARY_SUITES:-}" ] && [[ " $LIBRARY_SUITES " != *" $name "* ]] && continue
  install "$name" "$pins" || { status=1; continue; }
  dir="$root/.test-deps/libraries/$name/node_modules/$package"
  logs="$(mktemp -d)"
  [ "$format" = jest ] && write_jest_config "$logs"
  hook="--require $root/lib/register.js"
  failed=0
  for mode in plain register; do
    options=""
    [ "$mode" = register ] && options="$hook"
    start=$(date +%s)
    rc=$(run "$dir" "$command" "$options" "$logs/$mode.log" "$logs/$mode.err" "$format")
    echo "$name ($mode): exit $rc, $(( $(date +%s) - start )) s"
    if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
      echo "✖ $name ($mode) did not finish within $budget s"
      failed=1
    fi
  done
  # The hooked run counts the forks procwire served (one debug line each):
  # a suite whose forks all went to Node's own fork would pass twice and
  # prove nothing.
  served=$(grep -c 'register: child_process.fork(.*) forked through procwire' "$logs/register.err")
  fellBack=$(grep -c "register: child_process.fork(.*) runs Node's own fork" "$logs/register.err")
  echo "$name (register): $served forks served by procwire, $fellBack by Node's own fork"
  if [ "$served" = 0 ]; then
    echo "✖ $name: no fork went through procwire in the hooked run"
    grep -m5 'PROCWIRE' "$logs/register.err"
    failed=1
  fi
  # A runner's own workers carry the suite's forks, so those would pass the
  # count above even if the runner's fork missed the hook: they count apart.
  if [ -n "$runnerWorker" ]; then
    workers=$(grep 'register: child_process.fork(.*) forked through procwire' "$logs/register.err" | grep -cE "$runnerWorker")
    echo "$name (register): $workers of them the runner's own workers"
    if [ "$workers" = 0 ]; then
      echo "✖ $name: none of the runner's own workers went through procwire"
      failed=1
    fi
  fi
  # Old suites assert on timing and pids: when a test passes plainly and
  # fails with the hook, the suite runs again both ways before it counts (it
  # must pass in both plain runs and fail in both hooked ones), and
  # suite-outcomes.js names what the second runs settled.
  retry=()
  SUITE_RETRY=1 node scripts/suite-outcomes.js "$format" "$name" "$logs/plain.log" "$logs/register.log" > /dev/null
  if [ $? = 2 ]; then
    run "$dir" "$command" "$hook" "$logs/retry.log" "$logs/retry.err" "$format" > /dev/null
    run "$dir" "$command" "" "$logs/plain-retry.log" "$logs/plain-retry.err" "$format" > /dev/null
    retry=("$logs/retry.log" "$logs/plain-retry.log")
  fi
  node scripts/suite-outcomes.js "$format" "$name" "$logs/plain.log" "$logs/register.log" "${retry[@]}" || failed=1
  [ "$failed" = 1 ] && status=1
  rm -rf "$logs"
done
exit $status
