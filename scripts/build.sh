#!/usr/bin/env bash
# Configures (once) and builds one meson build directory.
#   scripts/build.sh DIR [--suite NAME | --target PATH]... [meson setup options...]
# With CXX set, the directory is configured with that compiler. With
# --suite, only the programs that suite's tests run are built; with
# --target, only that target (a path in the build directory, such as
# tests/lib_tests). The sanitizer builds run unit tests alone, so the
# daemon, the tools and the benchmarks are not compiled again for them.
set -euo pipefail
dir="$1"
shift
suites=()
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --suite) suites+=("$2"); shift 2 ;;
    --target) targets+=("$2"); shift 2 ;;
    *) break ;;
  esac
done
if [ ! -f "$dir/build.ninja" ]; then
  meson setup "$dir" "$@" >/dev/null
fi
if [ ${#suites[@]} -eq 0 ] && [ ${#targets[@]} -eq 0 ]; then
  ninja -C "$dir" >/dev/null
  exit 0
fi
# The executables of each suite's tests that the build makes, relative to
# the build directory.
for suite in "${suites[@]}"; do
  mapfile -t found < <(meson introspect "$dir" --tests | python3 -c '
import json, os, sys
root = os.path.realpath(sys.argv[1])
name = sys.argv[2]
seen = set()
for t in json.load(sys.stdin):
    if any(s == name or s.endswith(":" + name) for s in t["suite"]):
        exe = os.path.relpath(os.path.realpath(t["cmd"][0]), root)
        # A test run by a program from outside (python3 for layering.py)
        # has nothing to build.
        if exe.startswith(".."):
            continue
        if exe not in seen:
            seen.add(exe)
            print(exe)
' "$dir" "$suite")
  [ ${#found[@]} -gt 0 ] || { echo "build.sh: no tests in suite '$suite' in $dir" >&2; exit 2; }
  targets+=("${found[@]}")
done
ninja -C "$dir" "${targets[@]}" >/dev/null
