#!/usr/bin/env bash
# Runs the network-namespace integration tests against sluiced (or the
# kernel-bridge stand-in). Needs root. See tests/integration/README.md.
#
#   tests/integration/run.sh [BUILD_DIR] [TEST...] [-t TEST]... [--plumbing | --limiting] [--list] [--keep]
#
#   BUILD_DIR      where sluiced was built (default build; sluiced is BUILD_DIR/src/sluiced
#                  unless SLUICED says otherwise)
#   TEST, -t TEST  run only these tests (names from --list; shell globs allowed)
#   --plumbing     only the tests of the topology, origin, clients and impairment
#   --limiting     only the tests that need the appliance's limiting
#   --list         print the tests (name, kind, policy, workers) and exit
#   --keep         leave the namespaces and files in place afterwards (debugging);
#                  also SLUICE_IT_KEEP=1
#
# Environment: SLUICE_APPLIANCE=sluiced (default) | kernel-bridge; SLUICED;
# SLUICED_EXTRA_ARGS; SLUICE_CHECK_CONFIG=0 to skip `sluiced --check-config`;
# SLUICE_READY_TIMEOUT (s, 20); SLUICE_TEST_TIMEOUT (s per test, 150);
# SLUICE_IMPAIR=auto | netem | shim; SLUICE_IT_ARTIFACTS (default
# BUILD_DIR/integration: logs of the last run).
#
# Prints "PASS name" or "FAIL name: why" per test; exits non-zero if any failed.
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
export LC_ALL=C
export PATH="/usr/sbin:/sbin:$PATH"
# The tests talk to 198.18.0.0/15 only; no proxy may intercept that.
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY no_proxy NO_PROXY

. "$HERE/topology.sh"
. "$HERE/origin.sh"
. "$HERE/lib.sh"

die() { echo "run.sh: $*" >&2; exit 2; }

build=""
selected=()
only_kind=""
list=0
keep="${SLUICE_IT_KEEP:-0}"
registry="$(bash "$HERE/tests.sh" list)"
# Each test takes two addresses of the pools by its index (topology.sh).
(( $(wc -l <<<"$registry") * 2 <= SLT_POOL_SIZE )) ||
  die "tests.sh registers $(wc -l <<<"$registry") tests; topology.sh's address pools hold $((SLT_POOL_SIZE / 2)): raise SLT_POOL_SIZE"
is_test() { awk '{print $1}' <<<"$registry" | grep -qxF -- "$1" || [[ "$1" == *[*?[]* ]]; }
while [ $# -gt 0 ]; do
  case "$1" in
    -t) [ $# -ge 2 ] || die "-t needs a test name"; selected+=("$2"); shift 2 ;;
    --plumbing) only_kind=plumbing; shift ;;
    --limiting) only_kind=limiting; shift ;;
    --list) list=1; shift ;;
    --keep) keep=1; shift ;;
    -h | --help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) die "unknown option $1 (see --help)" ;;
    *)
      if is_test "$1"; then selected+=("$1")
      elif [ -z "$build" ]; then build="$1"
      else die "'$1' is neither a test (see --list) nor the first argument"
      fi
      shift
      ;;
  esac
done
build="${build:-build}"

if [ "$list" = 1 ]; then
  printf '%-28s %-9s %-18s %s\n' TEST KIND POLICY WORKERS
  while read -r n k p w; do printf '%-28s %-9s %-18s %s\n' "$n" "$k" "$p" "$w"; done <<<"$registry"
  exit 0
fi

# Which tests, in registry order; each keeps its registry index (its addresses).
plan=()
idx=0
while read -r n k p w x; do
  take=1
  [ -n "$only_kind" ] && [ "$k" != "$only_kind" ] && take=0
  if [ ${#selected[@]} -gt 0 ]; then
    take=0
    for pat in "${selected[@]}"; do
      # shellcheck disable=SC2053  # glob match intended
      [[ "$n" == $pat ]] && take=1
    done
  fi
  [ "$take" = 1 ] && plan+=("$idx $n $k $p $w ${x:-}")
  idx=$((idx + 1))
done <<<"$registry"
for pat in "${selected[@]}"; do
  hit=0
  while read -r n _; do
    # shellcheck disable=SC2053  # glob match intended
    [[ "$n" == $pat ]] && hit=1
  done <<<"$registry"
  [ "$hit" = 1 ] || die "no test matches '$pat' (see --list)"
done
[ ${#plan[@]} -gt 0 ] || die "no test selected"

[ "$(id -u)" -eq 0 ] || die "needs root (it creates network namespaces)"
for tool in ip tc ethtool curl nginx nstat timeout; do
  command -v "$tool" >/dev/null || die "'$tool' is missing: run scripts/install-deps.sh test"
done
[ -x "$SLT_PY" ] || die "$SLT_PY is missing: run scripts/install-deps.sh test"

case "$SLUICE_APPLIANCE" in
  sluiced)
    if [ -z "${SLUICED:-}" ]; then
      SLUICED="$(cd "$build" 2>/dev/null && pwd)/src/sluiced"
      [ -d "$build" ] || SLUICED="$build/src/sluiced"
    fi
    ;;
  kernel-bridge) ;;
  *) die "SLUICE_APPLIANCE must be sluiced or kernel-bridge, not '$SLUICE_APPLIANCE'" ;;
esac
export SLUICE_APPLIANCE SLUICED="${SLUICED:-}" SLT_REPO="$REPO"

if [ "$SLUICE_APPLIANCE" = sluiced ] && [ ! -x "$SLUICED" ]; then
  die "sluiced not found at $SLUICED: build it (scripts/build.sh $build), point SLUICED at it, or run the plumbing tests against the stand-in (SLUICE_APPLIANCE=kernel-bridge)"
fi

# The logs of this run (the appliance's are written there directly).
if [ -n "${SLUICE_IT_ARTIFACTS:-}" ]; then art="$SLUICE_IT_ARTIFACTS"
elif [ -d "$build" ]; then art="$build/integration"
else art="/tmp/sluice-integration-logs"
fi
rm -rf "$art" 2>/dev/null
mkdir -p "$art" || die "cannot create the artifacts directory $art"
art="$(cd "$art" && pwd)"
export SLT_LOG_DIR="$art"

slt_clean_stale
if [ "$keep" = 1 ]; then slt_init "sltk-$$"; else slt_init "slt-$$"; fi

cleanup() {
  trap - EXIT INT TERM
  local msg
  if [ "$keep" != 1 ]; then
    if [ -n "$SLT_APPLIANCE_CONF" ] || [ -n "$SLT_APPLIANCE_PID" ]; then
      appliance_stop >"$SLT_TMP/appliance-stop.msg" 2>&1 || echo "FAIL appliance-exit: $(cat "$SLT_TMP/appliance-stop.msg")"
    fi
    origin_stop
  fi
  # Keep the logs of this run.
  if [ -d "$SLT_TMP" ]; then
    cp -r "$SLT_TMP/out" "$art/" 2>/dev/null
    cp "$SLT_TMP"/impair-*.log "$SLT_TMP"/impair-*.stats "$art/" 2>/dev/null
    mkdir -p "$art/nginx" && cp "$SLT_TMP"/nginx/*.log "$SLT_TMP/nginx/nginx.conf" "$art/nginx/" 2>/dev/null
    cp -r "$SLT_TMP/policies" "$art/" 2>/dev/null
  fi
  if [ "$keep" = 1 ]; then
    local app="none running"
    [ -n "$SLT_APPLIANCE_CONF" ] && app="$SLUICE_APPLIANCE${SLT_APPLIANCE_PID:+ pid $SLT_APPLIANCE_PID}, policy ${SLT_APPLIANCE_CONF%% *}, log $SLT_APPLIANCE_LOG"
    cat <<EOF

Kept (--keep): namespaces $NS_CLI $NS_BOX $NS_ORG, nginx (log $SLT_TMP/nginx/access.log), files in $SLT_TMP
  appliance: $app
  try:    ip netns exec $NS_CLI curl -i http://$ORIGIN4/
  remove: $HERE/topology.sh down $SLT_PREFIX
EOF
  else
    topology_down
  fi
}
trap cleanup EXIT
trap 'echo; echo "run.sh: interrupted" >&2; exit 130' INT
trap 'exit 143' TERM

# Undo what a test that died early may have left on the wire.
reset_network() {
  mss_clear >/dev/null 2>&1
  local ns ifc pf
  for pf in "$SLT_TMP"/impair-*.pid; do
    [ -e "$pf" ] || continue
    kill -KILL "$(cat "$pf")" 2>/dev/null
    rm -f "$pf"
  done
  for ns in "$NS_CLI:c0" "$NS_ORG:o0"; do
    ifc="${ns##*:}" ns="${ns%%:*}"
    tc -n "$ns" qdisc del dev "$ifc" root >/dev/null 2>&1
    tc -n "$ns" qdisc del dev "$ifc" clsact >/dev/null 2>&1
    ip -n "$ns" link del sx0 >/dev/null 2>&1
  done
}

impair_kind="${SLUICE_IMPAIR:-auto}"
t_start=$SECONDS
echo "integration tests: appliance $SLUICE_APPLIANCE${SLUICED:+ ($SLUICED)}, namespaces $SLT_PREFIX-*, logs in $art"
topology_up || die "could not build the topology"
if [ "$impair_kind" = auto ]; then
  if slt_have_netem; then impair_kind="netem"; else impair_kind="shim (this kernel has no sch_netem)"; fi
fi
echo "  impairment: $impair_kind"
msg="$(origin_start 2>&1)" || die "the origin (nginx) did not start: $msg"
make_policies || die "could not write the policy copies"
mkdir -p "$SLT_TMP/out" "$SLT_TMP/why"

passed=0
skipped=0
failed_n=0
expected_n=0
failures=()
broken=""        # the appliance configuration that failed to start
report_fail() {  # report_fail NAME KIND WHY...
  local name="$1" kind="$2"
  shift 2
  local first="$1"
  shift
  local suffix=""
  if [ "$SLUICE_APPLIANCE" = kernel-bridge ] && [ "$kind" = limiting ]; then
    suffix="  [expected: the kernel-bridge stand-in does no limiting]"
    expected_n=$((expected_n + 1))
  fi
  echo "FAIL $name: $first$suffix"
  local line
  for line in "$@"; do echo "    $line"; done
  failed_n=$((failed_n + 1))
  failures+=("$name")
}

# Stops the appliance in this shell (it must reap sluiced to see its status);
# a sluiced that does not exit cleanly on SIGTERM is a failure of its own.
stop_appliance_checked() {
  if ! appliance_stop >"$SLT_TMP/appliance-stop.msg" 2>&1; then
    local lines
    mapfile -t lines <"$SLT_TMP/appliance-stop.msg"
    report_fail appliance-exit plumbing "${lines[@]}"
  fi
}

for entry in "${plan[@]}"; do
  read -r index name kind policy workers extra <<<"$entry"
  # "args=A,B,...": sluiced runs with these options for this test (its
  # pools sized down, say); a test with none gets the defaults again.
  args=""
  case "$extra" in args=*) args="${extra#args=}" args="${args//,/ }" ;; esac
  if [[ " $args " == *" --af-xdp "* ]] && [ "$SLUICE_APPLIANCE" = sluiced ] && ! slt_have_af_xdp; then
    echo "SKIP $name (this kernel has no AF_XDP sockets)"
    skipped=$((skipped + 1))
    continue
  fi
  if [[ " $args " == *" --ports-tap "* ]] && [ "$SLUICE_APPLIANCE" = sluiced ] && ! slt_have_tun; then
    echo "SKIP $name (no /dev/net/tun for DPDK's tap ports)"
    skipped=$((skipped + 1))
    continue
  fi
  want="$(policy_file "$policy") $workers $args"
  if [ "$SLT_APPLIANCE_CONF" != "$want" ]; then
    if [ -n "$SLT_APPLIANCE_CONF" ]; then
      stop_appliance_checked
    fi
    if [ "$broken" = "$want" ]; then
      report_fail "$name" "$kind" "the appliance did not start with $policy, --workers $workers (see above)"
      continue
    fi
    if [ "$SLUICE_APPLIANCE" = sluiced ] && [ "${SLUICE_CHECK_CONFIG:-1}" != 0 ] && [ -x "$SLUICED" ]; then
      if ! msg="$(ip netns exec "$NS_BOX" timeout 20 "$SLUICED" --check-config "$(policy_file "$policy")" 2>&1)"; then
        broken="$want"
        mapfile -t lines < <(tail -n 20 <<<"$msg")
        report_fail "$name" "$kind" "sluiced --check-config $(policy_file "$policy") failed (SLUICE_CHECK_CONFIG=0 skips this check):" "${lines[@]}"
        continue
      fi
    fi
    # Another profile starts from full buckets, as its tests count on: the
    # last one's snapshot (control/bucket_snapshot.h) is not its to restore.
    # Nor are its table files (control/table_file.h), which a start
    # re-attaches whatever the policy.
    rm -f "$SLT_TMP/state/buckets.snapshot" "$SLT_TMP/state/"*.table "$SLT_TMP/state/"*.table.set-aside
    if ! appliance_start "$(policy_file "$policy")" "$workers" "$args" >"$SLT_TMP/appliance-start.msg" 2>&1; then
      broken="$want"
      mapfile -t lines <"$SLT_TMP/appliance-start.msg"
      report_fail "$name" "$kind" "the appliance did not start with policy $policy, --workers $workers:" "${lines[@]}"
      continue
    fi
  fi

  export SLT_TEST_INDEX="$index" SLT_TEST_NAME="$name"
  export SLT_OUT="$SLT_TMP/out/$name" SLT_WHY="$SLT_TMP/why/$name"
  export SLT_SLUICED_LOG="$SLT_APPLIANCE_LOG"  # topology.sh, sourced by the test, starts with none
  mkdir -p "$SLT_OUT"
  rm -f "$SLT_WHY"
  t0=$SECONDS
  # "restart": the test's first phase (t_NAME_before) runs, then sluiced is
  # stopped and started again with the same state directory, then the test.
  # "crash": the same, but sluiced is killed (SIGKILL) instead of stopped.
  # "crash-edit=[FILE:]OFFSET": killed, then the byte at OFFSET of FILE in
  # the state directory (buckets.table if none is named) made 0x09 (a
  # layout it does not read, or a damaged header).
  # "crash-in-change=N": sluiced is started again for the first phase with
  # SLUICE_TEST_DIE_IN_CHANGE=N (src/sluiced_notify.h), and must have killed
  # itself in the middle of a change by the phase's end.
  if { [ "$extra" = restart ] || [ "$extra" = crash ] || [[ "$extra" == crash-edit=* ]] ||
    [[ "$extra" == crash-in-change=* ]]; } && [ "$SLUICE_APPLIANCE" = sluiced ]; then
    if [[ "$extra" == crash-in-change=* ]]; then
      stop_appliance_checked
      if ! SLUICE_TEST_DIE_IN_CHANGE="${extra#crash-in-change=}" appliance_start "$(policy_file "$policy")" \
        "$workers" "$args" >"$SLT_TMP/appliance-start.msg" 2>&1; then
        mapfile -t lines <"$SLT_TMP/appliance-start.msg"
        report_fail "$name" "$kind" "the appliance did not start with SLUICE_TEST_DIE_IN_CHANGE:" "${lines[@]}"
        continue
      fi
      export SLT_SLUICED_LOG="$SLT_APPLIANCE_LOG"
    fi
    if ! timeout -k 5 "${SLUICE_TEST_TIMEOUT:-150}" bash "$HERE/tests.sh" run "$name" before >"$SLT_OUT/before.log" 2>&1; then
      mapfile -t why <"$SLT_WHY" 2>/dev/null
      report_fail "$name" "$kind" "before the restart: ${why[0]:-see $SLT_OUT/before.log}" "${why[@]:1}"
      # A sluiced set to kill itself must not serve the next test.
      [[ "$extra" == crash-in-change=* ]] && appliance_kill
      continue
    fi
    case "$extra" in
      crash) appliance_kill ;;
      crash-in-change=*)
        pid="$SLT_APPLIANCE_PID"
        for ((i = 0; i < 100; i++)); do
          kill -0 "$pid" 2>/dev/null || break
          sleep 0.1
        done
        if kill -0 "$pid" 2>/dev/null; then
          appliance_kill
          report_fail "$name" "$kind" "sluiced did not kill itself in its change ${extra#crash-in-change=} (SLUICE_TEST_DIE_IN_CHANGE) within 10 s of the phase before the restart"
          continue
        fi
        wait "$pid" 2>/dev/null
        status=$?
        SLT_APPLIANCE_PID="" SLT_APPLIANCE_CONF=""
        echo "sluiced (pid $pid) ended with status $status in the phase before the restart" >>"$SLT_OUT/before.log"
        if [ "$status" -ne 137 ]; then
          report_fail "$name" "$kind" "sluiced ended with status $status in the phase before the restart, not killed (137) in its change"
          continue
        fi
        ;;
      crash-edit=*)
        appliance_kill
        edit="${extra#crash-edit=}" edit_file=buckets.table
        [[ "$edit" == *:* ]] && edit_file="${edit%%:*}" edit="${edit#*:}"
        printf '\x09' | dd of="$SLT_TMP/state/$edit_file" bs=1 seek="$edit" conv=notrunc status=none
        ;;
      *) stop_appliance_checked ;;
    esac
    if ! appliance_start "$(policy_file "$policy")" "$workers" "$args" >"$SLT_TMP/appliance-start.msg" 2>&1; then
      mapfile -t lines <"$SLT_TMP/appliance-start.msg"
      report_fail "$name" "$kind" "the appliance did not start again:" "${lines[@]}"
      continue
    fi
    export SLT_SLUICED_LOG="$SLT_APPLIANCE_LOG"
  fi
  # In the background so that Ctrl-C/SIGTERM reach the trap at once (bash
  # defers traps until a foreground command ends); teardown kills it.
  timeout -k 5 "${SLUICE_TEST_TIMEOUT:-150}" bash "$HERE/tests.sh" run "$name" >"$SLT_OUT/test.log" 2>&1 &
  tpid=$!
  slt_track_pid "$tpid"
  wait "$tpid"
  rc=$?
  rm -f "$SLT_TMP/pids/$tpid"
  dt=$((SECONDS - t0))
  died=""
  if [ -n "$SLT_APPLIANCE_PID" ] && ! kill -0 "$SLT_APPLIANCE_PID" 2>/dev/null; then
    wait "$SLT_APPLIANCE_PID" 2>/dev/null
    died="sluiced died during this test (status $?); log: $SLT_APPLIANCE_LOG"
    SLT_APPLIANCE_PID="" SLT_APPLIANCE_CONF=""
  fi
  if [ "$rc" -eq 0 ] && [ -z "$died" ]; then
    echo "PASS $name (${dt}s)"
    passed=$((passed + 1))
    continue
  fi
  reset_network
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    why=("timed out after ${SLUICE_TEST_TIMEOUT:-150}s" "$(tail -n 3 "$SLT_OUT/test.log" | tr '\n' ' ')")
  elif [ -s "$SLT_WHY" ]; then
    mapfile -t why <"$SLT_WHY"
  else
    why=("exited with status $rc; log tail: $(tail -n 5 "$SLT_OUT/test.log" | tr '\n' ' ')")
  fi
  [ -n "$died" ] && why=("$died" "${why[@]}")
  if [ ${#why[@]} -gt 1 ]; then
    report_fail "$name" "$kind" "${why[0]} (+$((${#why[@]} - 1)) more)" "${why[@]:1}"
  else
    report_fail "$name" "$kind" "${why[0]}"
  fi
  [ -n "$died" ] && tail -n 30 "$SLT_APPLIANCE_LOG" 2>/dev/null | sed 's/^/    | /'
done

if [ -n "$SLT_APPLIANCE_CONF" ] && [ "$keep" != 1 ]; then
  stop_appliance_checked
fi

echo
summary="$passed passed, $failed_n failed"
[ "$skipped" -gt 0 ] && summary+=", $skipped skipped"
[ "$expected_n" -gt 0 ] && summary+=" ($expected_n of them limiting tests, expected to fail against the kernel-bridge stand-in)"
echo "integration tests: $summary in $((SECONDS - t_start))s; logs in $art"
[ "$failed_n" -eq 0 ]
