#!/usr/bin/env bash
# The own test suites of jest-worker and workerpool from their source
# repositories (their npm packages ship no tests), each run plain and with
# NODE_OPTIONS="--require <root>/lib/register.js", compared per test as
# scripts/library-suites.sh does for the libraries whose tests the registry
# ships. It needs a checkout of each repository, which CI does not have, so
# it is a developer's check, not a section of scripts/test.sh:
#
#   bash scripts/upstream-suites.sh jest-worker PATH_TO_JEST_CHECKOUT
#   bash scripts/upstream-suites.sh workerpool PATH_TO_WORKERPOOL_CHECKOUT
#
# The checkout is copied into UPSTREAM_WORK (default /tmp/procwire-upstream)
# and left untouched; the suite's tools are installed there, never into
# procwire. Fails naming each test that passes plainly and fails with the
# hook, and when no fork went through procwire in the hooked run.
#
#   UPSTREAM_SUITE_SECONDS=600   time limit of one run
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
suite="${1:-}"
checkout="${2:-}"
if [ -z "$suite" ] || [ ! -d "$checkout" ]; then
  echo "usage: bash scripts/upstream-suites.sh jest-worker|workerpool CHECKOUT_DIR" >&2
  exit 2
fi
checkout="$(cd "$checkout" && pwd)"
work="${UPSTREAM_WORK:-/tmp/procwire-upstream}/$suite"
budget="${UPSTREAM_SUITE_SECONDS:-600}"
hook="--require $root/lib/register.js"
logs="$work/logs"

npm_install() {
  npm install --no-audit --no-fund --ignore-scripts --no-save "$@" > "$logs/install.log" 2>&1 ||
    { echo "✖ $suite: npm install failed (see $logs/install.log)"; exit 1; }
}

# jest-worker: its sources and tests (packages/jest-worker), compiled by
# babel as jest's own repository does, run by the released jest that matches
# the checkout's major version; its leak test imports the package's build/,
# made here from src/ the same way.
prepare_jest_worker() {
  rm -rf "$work" && mkdir -p "$work" "$logs"
  cp -r "$checkout/packages/jest-worker/." "$work/"
  cd "$work" || exit 1
  echo '{ "private": true }' > package.json
  cat > babel.config.js <<'EOF'
module.exports = {
  presets: [['@babel/preset-env', { targets: { node: 'current' }, modules: false }], ['@babel/preset-typescript', { allowDeclareFields: true }]],
  plugins: [['@babel/plugin-transform-modules-commonjs', { allowTopLevelThis: true }]],
};
EOF
  cat > jest.config.js <<'EOF'
module.exports = {
  testMatch: ['<rootDir>/src/**/__tests__/**/*.test.ts'],
  testPathIgnorePatterns: ['/__fixtures__/', '/node_modules/'],
};
EOF
  npm_install jest@30.5.2 babel-jest@30.5.2 @babel/core@7 @babel/cli@7 @babel/preset-env@7 \
    @babel/preset-typescript@7 @babel/plugin-transform-modules-commonjs@7 jest-util@30.5.1 \
    jest-leak-detector@30.5.0 @ungap/structured-clone@1.3.0 merge-stream@2.0.0 supports-color@8.1.1 \
    graceful-fs@4.2.11 get-stream@6.0.1 worker-farm@1.7.0 @types/node@20
  npx --no-install babel src --out-dir build --extensions .ts --ignore '**/__tests__/**' > "$logs/build.log" 2>&1 ||
    { echo "✖ jest-worker: babel build failed (see $logs/build.log)"; exit 1; }
}

# workerpool: its own install (its lockfile) and build (rollup: the test
# workers load the built package), then mocha over test/ against src/.
prepare_workerpool() {
  rm -rf "$work" && mkdir -p "$work"
  tar -C "$checkout" --exclude=./node_modules -cf - . | tar -C "$work" -xf -
  mkdir -p "$logs"
  cd "$work" || exit 1
  npm ci --no-audit --no-fund --ignore-scripts > "$logs/install.log" 2>&1 ||
    { echo "✖ workerpool: npm ci failed (see $logs/install.log)"; exit 1; }
  npx --no-install rollup -c rollup.config.mjs > "$logs/build.log" 2>&1 ||
    { echo "✖ workerpool: rollup build failed (see $logs/build.log)"; exit 1; }
}

# One run; stdout and stderr apart (the hook's debug lines go to stderr).
run() {
  local mode="$1" options=""
  [ "${mode#plain}" = "$mode" ] && options="$hook"
  local start
  start=$(date +%s)
  case "$suite" in
    jest-worker)
      NODE_OPTIONS="$options" NODE_DEBUG="${options:+procwire_register}" timeout --kill-after=10 "$budget" \
        npx --no-install jest --ci --runInBand --json --outputFile="$logs/$mode.json" \
        > "$logs/$mode.out" 2> "$logs/$mode.err"
      ;;
    workerpool)
      NODE_OPTIONS="$options" NODE_DEBUG="${options:+procwire_register}" timeout --kill-after=10 "$budget" \
        npx --no-install mocha test --reporter tap > "$logs/$mode.tap" 2> "$logs/$mode.err"
      ;;
  esac
  local rc=$?
  echo "$suite ($mode): exit $rc, $(( $(date +%s) - start )) s"
  [ "$rc" = 124 ] || [ "$rc" = 137 ] && echo "✖ $suite ($mode) did not finish within $budget s"
}

case "$suite" in
  jest-worker) prepare_jest_worker; format=jest; ext=json ;;
  workerpool) prepare_workerpool; format=tap; ext=tap ;;
  *) echo "unknown suite: $suite (jest-worker or workerpool)" >&2; exit 2 ;;
esac

status=0
run plain
run register
served=$(grep -c 'register: child_process.fork(.*) forked through procwire' "$logs/register.err")
fellBack=$(grep -c "register: child_process.fork(.*) runs Node's own fork" "$logs/register.err")
echo "$suite (register): $served forks served by procwire, $fellBack by Node's own fork"
[ "$served" = 0 ] && { echo "✖ $suite: no fork went through procwire in the hooked run"; status=1; }
retry=()
SUITE_RETRY=1 node "$root/scripts/suite-outcomes.js" "$format" "$suite" "$logs/plain.$ext" "$logs/register.$ext" > /dev/null
if [ $? = 2 ]; then
  run retry
  run plain-retry
  retry=("$logs/retry.$ext" "$logs/plain-retry.$ext")
fi
node "$root/scripts/suite-outcomes.js" "$format" "$suite" "$logs/plain.$ext" "$logs/register.$ext" "${retry[@]}" || status=1
echo "logs: $logs"
exit $status
