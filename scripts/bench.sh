#!/usr/bin/env bash
# The benchmarks, as the README quotes them: each repeated (default 5 times,
# SLUICE_BENCH_REPS) and reported as the median, with Node's http_parser
# measured in the same run as a baseline. Run on an otherwise idle machine.
set -euo pipefail
cd "$(dirname "$0")/.."

reps="${SLUICE_BENCH_REPS:-5}"
scripts/install-deps.sh build
scripts/build.sh build --buildtype=release
./build/perf/parser_bench --benchmark_repetitions="$reps" --benchmark_report_aggregates_only=true \
  --benchmark_display_aggregates_only=true --benchmark_min_time=0.5 "$@" |
  grep -E '^(Run on|Load|BM_.*_median|---|Benchmark)'
