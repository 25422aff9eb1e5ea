#!/usr/bin/env bash
# The real-use suites of tools that fork (test/tools/*.suite.js: jest-worker,
# workerpool, tinypool's child_process runtime, mocha --parallel, and
# Vitest with procwire/vitest's pool), then the own test suites that some
# libraries ship (scripts/library-suites.sh), each run
# plain and with NODE_OPTIONS="--require procwire/register", on this
# machine's Node only. Fails when a suite fails either way, naming the tests,
# and in particular when a test that passes plainly fails with the hook.
#
# The tools are installed once, pinned, into the private prefix .test-deps/
# (no dependency of procwire); the current packages of these tools ship no
# tests of their own, so the suites use each tool as its users do.
#
#   TOOL_SUITE_SECONDS=300   time limit of one suite run
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

pins="jest-worker@30.5.1 workerpool@10.0.3 tinypool@2.2.0 mocha@11.8.0 vitest@4.1.12 jest@30.5.1"
deps="$root/.test-deps"
if [ "$(cat "$deps/.installed" 2>/dev/null)" != "$pins" ]; then
  mkdir -p "$deps"
  echo '{ "private": true }' > "$deps/package.json"
  # shellcheck disable=SC2086
  if ! npm install --prefix "$deps" --no-audit --no-fund --ignore-scripts --no-save $pins >/dev/null; then
    echo "✖ tool suites: could not install $pins into .test-deps/"
    exit 1
  fi
  echo "$pins" > "$deps/.installed"
fi

status=0
for suite in test/tools/*.suite.js; do
  name="$(basename "$suite" .suite.js)"
  declare -A outcome=()
  for mode in plain register; do
    options=""
    # By path: some suites run their tool in a temporary directory, where
    # the package name would not resolve (in a project it is installed).
    [ "$mode" = register ] && options="--require $root/lib/register.js"
    log="$(mktemp)"
    start=$(date +%s)
    NODE_OPTIONS="$options" timeout --kill-after=10 "${TOOL_SUITE_SECONDS:-300}" \
      node --test --test-reporter=tap "$suite" > "$log" 2>&1
    rc=$?
    took=$(( $(date +%s) - start ))
    pass=$(grep -cE '^ok [0-9]+ - ' "$log")
    fail=$(grep -cE '^not ok [0-9]+ - ' "$log")
    echo "$name ($mode): $pass passed, $fail failed, ${took} s"
    if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
      echo "✖ $name ($mode) did not finish within ${TOOL_SUITE_SECONDS:-300} s"
      status=1
    elif [ "$rc" != 0 ]; then
      grep -E '^not ok [0-9]+ - ' "$log" | sed "s/^/✖ $name ($mode): /"
      [ "$fail" = 0 ] && tail -20 "$log"
      status=1
    fi
    while IFS= read -r line; do
      outcome["$mode:${line#* - }"]="${line%% *}"
    done < <(grep -E '^(not )?ok [0-9]+ - ' "$log" | sed -E 's/^(not ok|ok) [0-9]+ - /\1 - /; s/^not ok/not/')
    rm -f "$log"
  done
  for key in "${!outcome[@]}"; do
    case "$key" in
      plain:*)
        test="${key#plain:}"
        if [ "${outcome[$key]}" = ok ] && [ "${outcome[register:$test]:-missing}" != ok ]; then
          echo "✖ $name: '$test' passes plainly and fails with procwire/register"
          status=1
        fi
        ;;
    esac
  done
  unset outcome
done

# The libraries' own shipped test suites (workerpool 3, also run by mocha
# --parallel and by jest -w 2, worker-farm, recluster), compared the same
# way, in this section's time budget.
bash scripts/library-suites.sh || status=1
exit $status
