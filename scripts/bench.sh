#!/usr/bin/env bash
# The benchmarks, as docs/performance.md quotes them: each case repeated (default 5
# times, SLUICE_BENCH_REPS) and reported as the median. perf/parser_bench
# measures Node's http_parser in the same run as a baseline; the packet-rate
# harness measures its own ring overhead; the end-to-end comparison runs
# nginx's limit_req proxy in the same run. Run on an otherwise idle machine.
# Extra arguments go to every Google Benchmark program (for example
# --benchmark_filter=Head).
#   SLUICE_BENCH_E2E=0   skip the end-to-end comparison (it needs root and
#                        network namespaces, and takes about a minute)
set -euo pipefail
cd "$(dirname "$0")/.."

reps="${SLUICE_BENCH_REPS:-5}"
scripts/install-deps.sh demo
scripts/build.sh build --buildtype=release
for bench in parser_bench bucket_bench decide_bench; do
  echo "== perf/$bench"
  ./build/perf/$bench --benchmark_repetitions="$reps" --benchmark_report_aggregates_only=true \
    --benchmark_display_aggregates_only=true --benchmark_min_time=0.5 "$@" |
    grep -E '^(BM_.*_median|Run on)' || true
done
if [ -x ./build/perf/packet_rate ]; then
  echo "== perf/packet_rate (the worker loop on ring ports)"
  ./build/perf/packet_rate --repetitions "$reps" 2>&1 | grep -v '^EAL\|TELEMETRY'
  if [ "$(nproc)" -ge 2 ]; then
    echo "== perf/packet_rate --workers 2 (one worker against two, each on its own CPU)"
    ./build/perf/packet_rate --workers 2 --repetitions "$((reps * 4 + 1))" 2>&1 | grep -v '^EAL\|TELEMETRY'
  fi
fi
if [ "${SLUICE_BENCH_E2E:-1}" = 1 ]; then
  echo "== perf/e2e_compare.sh (wrk through sluiced and through nginx limit_req)"
  perf/e2e_compare.sh build --runs "$reps"
fi
