#!/usr/bin/env bash
# Builds the addon against another Node line's headers:
#   scripts/build-for.sh 24   ->  .build/node24/build/Release/procwire.node
# The build happens in its own directory so the default build/ (for the
# machine's Node) is left alone.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
major="$1"
nodedir="$root/.nodes/$major"
[ -f "$nodedir/include/node/node.h" ] || bash "$root/scripts/setup-nodes.sh" "$major"
out="$root/.build/node$major"
mkdir -p "$out"
cp "$root/binding.gyp" "$out/binding.gyp"
ln -sfn "$root/src" "$out/src"
gyp="$(npm root -g)/npm/node_modules/node-gyp/bin/node-gyp.js"
[ -f "$gyp" ] || gyp="$root/node_modules/node-gyp/bin/node-gyp.js"
stamp="$out/.stamp"
newest="$(find "$root/src" "$root/binding.gyp" -type f -newer "$stamp" 2>/dev/null | head -1 || true)"
want="$("$nodedir/bin/node" -p process.versions.modules)"
have="$(grep -o '"node_module_version": [0-9]*' "$out/build/config.gypi" 2>/dev/null | grep -o '[0-9]*$' || true)"
if [ -f "$out/build/Release/procwire.node" ] && [ -f "$stamp" ] && [ -z "$newest" ] && [ "$want" = "$have" ]; then
  echo "node $major: addon up to date"
  exit 0
fi
# npm exports its own nodedir setting (for this machine's Node) to scripts it
# runs; node-gyp would take that over --nodedir, so it is cleared here.
( cd "$out" && env -u npm_config_nodedir -u NPM_CONFIG_NODEDIR \
    "$nodedir/bin/node" "$gyp" rebuild --nodedir="$nodedir" -j 2 >"$out/build.log" 2>&1 ) || {
  tail -40 "$out/build.log" >&2; echo "node $major: build failed" >&2; exit 1; }
touch "$stamp"
echo "node $major: built $out/build/Release/procwire.node"
