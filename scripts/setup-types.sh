#!/usr/bin/env bash
# The TypeScript toolchains test/types.test.js compiles against, installed
# once each into a private prefix, .test-deps/types/ (never into the shared
# node_modules): the latest typescript, and @types/node of every Node major
# procwire supports plus the newest. Each prefix is reused while its
# package.json names the pinned version, so a second run costs nothing.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="$root/.test-deps/types"
# Pinned so the check is reproducible; raise them when a new line ships.
TYPESCRIPT=7.0.2
NODE_TYPES=(20.19.43 22.20.5 24.19.4 25.9.9 26.6.6)

install() {
  local prefix="$1" spec="$2" name="$3" version="$4"
  if [ -f "$prefix/node_modules/$name/package.json" ] &&
     grep -q "\"version\": \"$version\"" "$prefix/node_modules/$name/package.json"; then
    return 0
  fi
  mkdir -p "$prefix"
  [ -f "$prefix/package.json" ] || echo '{"private": true}' > "$prefix/package.json"
  echo "setup-types: installing $spec into ${prefix#"$root"/}"
  npm install --prefix "$prefix" --no-audit --no-fund --no-package-lock --ignore-scripts "$spec" >/dev/null
}

install "$dir/typescript" "typescript@$TYPESCRIPT" typescript "$TYPESCRIPT"
for v in "${NODE_TYPES[@]}"; do
  install "$dir/node-${v%%.*}" "@types/node@$v" @types/node "$v"
done
