#!/usr/bin/env bash
# The benchmarks, as the README quotes them: each case repeated (default 5
# times, SLUICE_BENCH_REPS) and reported as the median. perf/parser_bench
# measures Node's http_parser in the same run as a baseline. Run on an
# otherwise idle machine. Extra arguments go to every benchmark program
# (for example --benchmark_filter=Head).
set -euo pipefail
cd "$(dirname "$0")/.."

reps="${SLUICE_BENCH_REPS:-5}"
scripts/install-deps.sh build
scripts/build.sh build --buildtype=release
for bench in parser_bench bucket_bench decide_bench; do
  echo "== perf/$bench"
  ./build/perf/$bench --benchmark_repetitions="$reps" --benchmark_report_aggregates_only=true \
    --benchmark_display_aggregates_only=true --benchmark_min_time=0.5 "$@" |
    grep -E '^(BM_.*_median|Run on)' || true
done
