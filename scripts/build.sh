#!/usr/bin/env bash
# Configures (once) and builds one meson build directory.
#   scripts/build.sh DIR [meson setup options...]
# With CXX set, the directory is configured with that compiler.
set -euo pipefail
dir="$1"
shift
if [ ! -f "$dir/build.ninja" ]; then
  meson setup "$dir" "$@" >/dev/null
fi
ninja -C "$dir" >/dev/null
