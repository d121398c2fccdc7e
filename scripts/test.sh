#!/usr/bin/env bash
# The README's second command, and what .ci/run calls: installs what is
# missing, builds, and runs every test:
#   1. the unit tests (GoogleTest), once per instruction set the CPU has;
#   2. the same tests built with AddressSanitizer and UndefinedBehaviorSanitizer;
#   3. the same tests built with ThreadSanitizer (the lock-free tables'
#      concurrency tests are the point);
#   4. sluiced's start-up failures and exit codes (tests/integration/cli.sh);
#      and sluice-replay's bad input, exit codes and messages
#      (tests/integration/replay_cli.sh);
#   5. sluiced under systemd (tests/integration/systemd.sh): the unit verified,
#      READY/STATUS/RELOADING/STOPPING and a watchdog a stalled worker stops;
#   6. the network-namespace integration suite against the real sluiced
#      (tests/integration/run.sh: nginx origin, curl, keep-alive client,
#      Chromium; every loop bounded, everything torn down);
#   7. cluster budgets end to end (tests/integration/cluster.sh): two sluiced
#      boxes sharing budgets through a Redis Cluster of 3 primaries and 3
#      replicas (runs and credentials replicated, failover, Redis down,
#      Redis back), under a minute;
#   8. the libFuzzer targets, each for a bounded time: the head parser with
#      its differential checks (SLUICE_FUZZ_SECONDS, default 60), then the
#      flow engine segment by segment (SLUICE_FLOW_FUZZ_SECONDS, default 60),
#      then sluice-replay's inputs: captures and access logs
#      (SLUICE_REPLAY_FUZZ_SECONDS, default 60), and damaged table files
#      re-attached (SLUICE_TABLE_FUZZ_SECONDS, default 30);
#   9. the Debian package (scripts/package-check.sh), built in the background
#      while the fuzzers run: lintian-clean, installed, used from the
#      installed files (check-config, the unit verified, man pages rendered,
#      a short run in namespaces) and purged, nothing left behind;
#  10. cluster budgets' Redis CPU per admitted request beside the overshoot,
#      and one box of three cut from Redis for 110 s (perf/cluster_redis_cost,
#      in the background while the fuzzers run): past a bound, or with the
#      cut box's spending not repaid, it fails.
# Stops at the first failure, with a non-zero exit status.
set -euo pipefail
cd "$(dirname "$0")/.."

fuzz_seconds="${SLUICE_FUZZ_SECONDS:-60}"
flow_fuzz_seconds="${SLUICE_FLOW_FUZZ_SECONDS:-60}"
replay_fuzz_seconds="${SLUICE_REPLAY_FUZZ_SECONDS:-60}"
table_fuzz_seconds="${SLUICE_TABLE_FUZZ_SECONDS:-30}"
# Each step's wall-clock duration, printed when the next one starts and
# again as a table at the end (also after a failure), so that a slow step
# shows where CI's time goes.
step_names=()
step_seconds=()
step_started=$SECONDS
step_close() {
  if [ ${#step_names[@]} -gt 0 ]; then
    local last=$((${#step_names[@]} - 1))
    step_seconds[$last]=$((SECONDS - step_started))
    printf -- '-- %s: %d s\n' "${step_names[$last]}" "${step_seconds[$last]}"
  fi
}
step() {
  step_close
  step_names+=("$*")
  step_started=$SECONDS
  printf '\n== %s\n' "$*"
}
step_table() {
  local rc=$? i
  step_close
  printf '\n== step durations (%s)\n' "$([ "$rc" -eq 0 ] && echo passed || echo "failed, exit $rc")"
  for i in "${!step_names[@]}"; do
    printf '%6d s  %s\n' "${step_seconds[$i]:-0}" "${step_names[$i]}"
  done
  printf '%6d s  total\n' "$SECONDS"
}
trap step_table EXIT

# The ThreadSanitizer and fuzz builds: -O1 with line tables only (file:line
# in the sanitizers' stack traces), as the sanitizers' own documentation and
# OSS-Fuzz build; -O2 with full debug information took about twice the
# compile time of the library code for no finding more. Asserts stay on.
sanitizer_build=(-Doptimization=1 -Ddebug=true)
# The AddressSanitizer tree runs the unit tests once, where a fuzzer's
# speed does not matter: at -O0 its heaviest files (the CLI and JSON
# headers) compile in 55-80% of -O1's time, and its tests take about 13 s
# longer (66 s against 53 s on this 2-core VM).
asan_build=(-Doptimization=0 -Ddebug=true)

step "installing what is missing (scripts/install-deps.sh test)"
scripts/install-deps.sh test

step "building build/ (release)"
scripts/build.sh build --buildtype=release
step "unit tests (build/)"
meson test -C build --suite lib --print-errorlogs

step "instruction counts of the worker loop against perf/instructions.expected (perf/instructions.sh --check)"
perf/instructions.sh --check build

step "building build-asan/ (AddressSanitizer + UndefinedBehaviorSanitizer)"
scripts/build.sh build-asan --suite lib "${asan_build[@]}" -Dperf=false \
  -Db_sanitize=address,undefined -Dcpp_args="-g1 -fno-sanitize-recover=all" -Db_lundef=false
step "unit tests under AddressSanitizer + UndefinedBehaviorSanitizer (build-asan/)"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  meson test -C build-asan --suite lib --no-rebuild --print-errorlogs

step "building build-tsan/ (ThreadSanitizer)"
scripts/build.sh build-tsan --target tests/lib_tests "${sanitizer_build[@]}" -Dperf=false -Db_sanitize=thread \
  -Dcpp_args=-g1 -Db_lundef=false
step "unit tests under ThreadSanitizer (build-tsan/)"
TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 ./build-tsan/tests/lib_tests --gtest_brief=1

step "sluiced's command line and start-up failures (tests/integration/cli.sh)"
tests/integration/cli.sh build

step "sluice-replay's command line and bad input (tests/integration/replay_cli.sh)"
tests/integration/replay_cli.sh build

step "sluiced under systemd: the unit, notifications and watchdog (tests/integration/systemd.sh)"
tests/integration/systemd.sh build

step "integration tests in network namespaces (tests/integration/run.sh)"
tests/integration/run.sh build

step "cluster budgets across two boxes on a Redis Cluster (tests/integration/cluster.sh)"
tests/integration/cluster.sh build

# Runs one libFuzzer target of build-fuzz/ for a bounded time from its own
# corpus directory; on failure prints the log's tail and keeps the inputs
# that failed in build-fuzz/crashes/. Prints the final statistics.
#   run_fuzzer NAME SECONDS 'SEED_GLOB'|- [libFuzzer options...]
run_fuzzer() {
  local name="$1" seconds="$2" seeds="$3"
  shift 3
  local dir="$work/$name"
  mkdir -p "$dir/corpus" "$dir/artifacts"
  # shellcheck disable=SC2086 # the glob is meant to expand here
  if [ "$seeds" != - ]; then cp $seeds "$dir/corpus/"; fi
  if ! "./build-fuzz/tests/fuzz/$name" "$dir/corpus" "$@" -timeout=10 -rss_limit_mb=2048 \
        -max_total_time="$seconds" -print_final_stats=1 \
        -artifact_prefix="$dir/artifacts/" >"$dir/fuzz.log" 2>&1; then
    tail -n 40 "$dir/fuzz.log"
    for a in "$dir"/artifacts/*; do
      [ -e "$a" ] || continue
      mkdir -p build-fuzz/crashes && cp "$a" "build-fuzz/crashes/$name-$(basename "$a")"
      echo "fuzz failure input kept in build-fuzz/crashes/$name-$(basename "$a")"
    done
    exit 1
  fi
  grep -E '^#[0-9]+' "$dir/fuzz.log" | tail -n 1 || true  # the coverage reached (cov:, ft:, corp:)
  grep -E '^stat::number_of_executed_units|^stat::average_exec_per_sec|^Done' "$dir/fuzz.log" || true
}

step "building build-fuzz/ (libFuzzer targets, clang, ASan + UBSan)"
CXX=clang++ scripts/build.sh build-fuzz \
  --target tests/fuzz/head_parser_fuzz --target tests/fuzz/flow_engine_fuzz --target tests/fuzz/replay_input_fuzz \
  --target tests/fuzz/table_file_fuzz \
  "${sanitizer_build[@]}" -Dfuzz=true -Dtests=false -Dperf=false \
  -Db_sanitize=address,undefined -Dcpp_args="-gline-tables-only -fno-sanitize-recover=all" -Db_lundef=false
work="$(mktemp -d)"

# The Debian package is built (and lintian run) in the background while the
# fuzzers run: each holds one core, and at nice 19 the build takes the
# other without slowing them. The package step waits for it.
package_work="$(mktemp -d /tmp/sluice-package.XXXXXX)"
package_started=$SECONDS
setsid nice -n 19 scripts/package-check.sh build "$package_work" >"$package_work/background.log" 2>&1 &
package_pid=$!
# Cluster budgets' cost to Redis and a long partition (perf/cluster_redis_cost:
# three boxes in one process on a redis-server of its own on loopback; one
# box cut from Redis for 110 s while all three overspend, then its spending
# repaid): mostly waiting, so it runs beside the fuzzers too; its own step
# at the end waits for it.
partition_log="$package_work/partition.log"
setsid build/perf/cluster_redis_cost --seconds 4 --partition 110 --check >"$partition_log" 2>&1 &
partition_pid=$!
stop_background() {
  for pid in "${package_pid:-}" "${partition_pid:-}"; do
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
      kill -TERM -- "-$pid" 2>/dev/null || true
      wait "$pid" 2>/dev/null || true
    fi
  done
  rm -rf "$package_work"
}
trap 'rc=$?; rm -rf "$work"; stop_background; (exit $rc); step_table' EXIT
step "fuzzing the head parser for ${fuzz_seconds}s (build-fuzz/)"
run_fuzzer head_parser_fuzz "$fuzz_seconds" 'tests/data/heads/*.http' -dict=tests/fuzz/http.dict -max_len=8192

# With retransmissions that carry other bytes than the first copy, and client
# segments lost after the appliance (SLUICE_FUZZ_OVERLAP=0 leaves them out).
step "fuzzing the flow engine segment by segment for ${flow_fuzz_seconds}s (build-fuzz/)"
SLUICE_FUZZ_OVERLAP="${SLUICE_FUZZ_OVERLAP:-1}" \
  run_fuzzer flow_engine_fuzz "$flow_fuzz_seconds" - -max_len=4096

# Captures as given and as built from the input's description of segments,
# nginx and JSON log lines, whole logs (tests/data/replay/README.md).
step "fuzzing sluice-replay's inputs (captures, access logs) for ${replay_fuzz_seconds}s (build-fuzz/)"
run_fuzzer replay_input_fuzz "$replay_fuzz_seconds" 'tests/data/replay/*.seed' \
  -dict=tests/data/replay/replay_input.dict -max_len=16384

# The limiter's table files damaged anywhere, then re-attached or set aside.
step "fuzzing the re-attach of damaged table files for ${table_fuzz_seconds}s (build-fuzz/)"
run_fuzzer table_file_fuzz "$table_fuzz_seconds" - -max_len=4096

step "the Debian package: build, lintian, install, use, purge (scripts/package-check.sh)"
package_ok=0
waited_from=$SECONDS
wait "$package_pid" && package_ok=1
package_pid=
cat "$package_work/background.log"
echo "(built in the background, started $((waited_from - package_started)) s before this step; waited $((SECONDS - waited_from)) s for it here)"
[ "$package_ok" = 1 ] || { echo "the package build failed (log above)"; exit 1; }
scripts/package-check.sh check "$package_work"

step "cluster budgets: Redis CPU per admitted request, and one box of three cut from Redis for 110 s (perf/cluster_redis_cost)"
partition_ok=0
wait "$partition_pid" && partition_ok=1
partition_pid=
grep -v '^sluiced: ' "$partition_log" || true
[ "$partition_ok" = 1 ] || { echo "past a bound, or the cut box's spending not repaid (log above)"; exit 1; }
