#!/usr/bin/env bash
# The README's first command: installs what is missing, builds, and runs the
# demo on its built-in defaults.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh demo
echo "== building (build/)"
scripts/build.sh build --buildtype=release
echo
exec ./build/src/sluice-demo "$@"
