#!/usr/bin/env bash
# sluiced under systemd, checked without systemd as PID 1 (the test
# machines' is not):
#   1. the files of dist/: sluiced@.service passes `systemd-analyze verify`
#      without a word about it (its programs pointed at BUILD_DIR's; a broken
#      copy is caught, so the check can fail); sysusers.d and tmpfiles.d
#      applied to a scratch root give the group and the modes the unit needs;
#   2. the unit's CapabilityBoundingSet= (with no_new_privs, through
#      setpriv): sluiced on AF_PACKET starts with it and not without any one
#      of its AF_PACKET capabilities; AF_XDP starts once CAP_SYS_ADMIN is
#      added, as the unit's comment says, and not before;
#   3. the notifications, on a NOTIFY_SOCKET the test owns
#      (notify_listener.py), from a sluiced with 2 workers under that set:
#      READY=1 with STATUS= after start; WATCHDOG=1 at least once per
#      WATCHDOG_USEC while the workers run; RELOADING=1 then READY=1 for each
#      reload, SIGHUP or sluicectl, a broken file's saying "refused" (and
#      sluicectl exiting 1); a periodic STATUS=; once worker 1 is stalled
#      (SLUICE_TEST_STALL_WORKER, test-only) no WATCHDOG=1 for three
#      intervals while the process lives and answers on its control socket;
#      STOPPING=1 on SIGTERM and exit 0; every datagram from sluiced's own
#      pid (NotifyAccess=main).
# sluiced runs on two veth pairs in a network namespace of the test's own
# (no addresses, no traffic). Needs root. About 45 s. Stops only what it
# started.
#   tests/integration/systemd.sh [BUILD_DIR]
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
build="$(cd "${1:-build}" 2>/dev/null && pwd)" || { echo "systemd.sh: no build directory '${1:-build}'" >&2; exit 2; }
sluiced="$build/src/sluiced"
sluicectl="$build/src/sluicectl"
unit=dist/systemd/sluiced@.service
for f in "$sluiced" "$sluicectl"; do [ -x "$f" ] || { echo "systemd.sh: $f not built" >&2; exit 2; }; done
[ "$(id -u)" -eq 0 ] || { echo "systemd.sh: needs root (network namespaces, AF_PACKET)" >&2; exit 2; }

ns="sls-$$"
tmp="$(mktemp -d "/tmp/sls-$$.XXXXXX")"
sluiced_pid="" listener_pid=""
# shellcheck disable=SC2317  # run by the EXIT trap
cleanup() {
  [ -n "$sluiced_pid" ] && kill -KILL "$sluiced_pid" 2>/dev/null
  [ -n "$listener_pid" ] && kill -TERM "$listener_pid" 2>/dev/null
  wait 2>/dev/null
  # Only this test's processes live in its namespace.
  ip netns pids "$ns" 2>/dev/null | xargs -r kill -KILL 2>/dev/null
  ip netns delete "$ns" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
failures=0
pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; failures=$((failures + 1)); }

# ------------------------------------------------------------ 1. the files

# The unit as installed, its programs at BUILD_DIR's paths (verify wants
# them to exist). --man=no: the man page is installed with the programs,
# not on a test machine.
verify_unit() {  # verify_unit UNIT_FILE: prints what systemd-analyze says of it; fails with it
  systemd-analyze verify --man=no "$1" 2>&1
}
mkdir "$tmp/units" "$tmp/broken"
sed -e "s|/usr/sbin/sluiced|$sluiced|g" -e "s|/usr/bin/sluicectl|$sluicectl|g" "$unit" >"$tmp/units/sluiced@.service"
if grep -q '/usr/bin/' "$tmp/units/sluiced@.service"; then
  fail "unit: a program path the test does not know: $(grep -o '/usr/bin/[^ ]*' "$tmp/units/sluiced@.service" | sort -u | tr '\n' ' ')"
fi
out="$(verify_unit "$tmp/units/sluiced@.service")"
rc=$?
ours="$(grep 'sluiced@' <<<"$out")"
if [ "$rc" -eq 0 ] && [ -z "$ours" ]; then pass "unit: systemd-analyze verify says nothing of sluiced@.service"
else fail "unit: systemd-analyze verify (exit $rc): $(tr '\n' '|' <<<"$out")"; fi
[ -n "$out" ] && [ -z "$ours" ] && echo "  (of other units: $(tr '\n' '|' <<<"$out"))"
sed -e 's/^Type=notify$/Type=notifyy/' -e "s|/usr/bin/sluicectl|$tmp/none/sluicectl|" -e "s|/usr/sbin/sluiced|$sluiced|g" \
  "$unit" >"$tmp/broken/sluiced@.service"
out="$(verify_unit "$tmp/broken/sluiced@.service")"
if grep -qi 'service type' <<<"$out" && grep -q "$tmp/none/sluicectl" <<<"$out"; then
  pass "unit: systemd-analyze verify finds a bad Type= and a missing program"
else fail "unit: systemd-analyze verify missed a broken unit: $(tr '\n' '|' <<<"$out")"; fi

# The group and directories, made under a scratch root as at install.
root="$tmp/root"
mkdir -p "$root/etc"
if ! out="$(systemd-sysusers --root="$root" "$PWD/dist/sysusers.d/sluice.conf" 2>&1 &&
            systemd-tmpfiles --create --root="$root" "$PWD/dist/tmpfiles.d/sluice.conf" 2>&1)"; then
  fail "sysusers.d/tmpfiles.d: $(tr '\n' '|' <<<"$out")"
else
  gid="$(awk -F: '$1 == "sluice" { print $3 }' "$root/etc/group")"
  got="$(stat -c '%n %a %u:%g' "$root/run/sluice" "$root/var/lib/sluice" "$root/run/dpdk" 2>&1 | sed "s|$root||")"
  want="$(printf '/run/sluice 750 0:%s\n/var/lib/sluice 700 0:0\n/run/dpdk 700 0:0' "$gid")"
  if [ -n "$gid" ] && [ "$got" = "$want" ]; then pass "sysusers.d/tmpfiles.d: group sluice ($gid), $(tr '\n' ',' <<<"$got")"
  else fail "sysusers.d/tmpfiles.d: got '$(tr '\n' ',' <<<"$got")', want '$(tr '\n' ',' <<<"$want")'"; fi
fi

# ------------------------------------- 2. capabilities, 3. the notifications

# The test-only stall is refused like a bad option when malformed.
err="$(SLUICE_TEST_STALL_WORKER=2:5 timeout 20 "$sluiced" --config config/default.yaml --af-packet a:b --workers 2 2>&1)"
rc=$?
if [ "$rc" -eq 2 ] && [ "$err" = "sluiced: SLUICE_TEST_STALL_WORKER: there is no worker 2 (--workers 2)" ]; then
  pass "SLUICE_TEST_STALL_WORKER out of range: exit 2 ($err)"
else fail "SLUICE_TEST_STALL_WORKER out of range: exit $rc: $err"; fi

ip netns add "$ns" || { echo "systemd.sh: cannot create namespace $ns" >&2; exit 1; }
ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
ip -n "$ns" link add c1 type veth peer name c0 && ip -n "$ns" link add o1 type veth peer name o0 || exit 1
for l in c0 c1 o0 o1; do ip -n "$ns" link set "$l" up || exit 1; done
cp config/default.yaml "$tmp/policy.yaml"

# The unit's CapabilityBoundingSet= as setpriv's --bounding-set, less `drop`.
bounding_set() {  # bounding_set [CAP_TO_DROP]
  local c list="-all"
  # shellcheck disable=SC2013  # the line's words are the capabilities
  for c in $(sed -n 's/^CapabilityBoundingSet=//p' "$unit"); do
    [ "$c" = "${1:-}" ] || list+=",+$(tr '[:upper:]' '[:lower:]' <<<"${c#CAP_}")"
  done
  echo "$list"
}

# A group to give the control socket to, as the unit's --control-group
# sluice does (CAP_CHOWN): the sluice group is not made on test machines.
control_group=(--control-group nogroup)
getent group nogroup >/dev/null || control_group=()

# sluiced in the namespace, as the unit runs it as far as capabilities go,
# under the watchdog's variables (WATCHDOG_PID is its own pid: each exec
# keeps the pid, the shell's $$ is sluiced's). Sets sluiced_pid.
start_sluiced() {  # start_sluiced BOUNDING_SET LOG 'ATTACH OPTIONS' [ENV=VALUE...]
  local caps="$1" log="$2" attach="$3"
  shift 3
  # shellcheck disable=SC2086  # attach is a list of words
  ip netns exec "$ns" env "$@" setpriv --bounding-set "$caps" --inh-caps=-all --no-new-privs \
    sh -c 'export WATCHDOG_PID=$$; exec "$@"' sh "$sluiced" --config "$tmp/policy.yaml" $attach --memory 256 \
    --control-socket "$tmp/control.sock" "${control_group[@]}" --state-dir "$tmp/state" >"$log" 2>&1 </dev/null &
  sluiced_pid=$!
}

# Waits (at most SECONDS) until the notifications' log has COUNT lines
# matching PATTERN; fails if sluiced exits meanwhile.
wait_for() {  # wait_for PATTERN COUNT SECONDS
  local deadline=$((SECONDS + $3))
  while [ "$(grep -c -- "$1" "$notes")" -lt "$2" ]; do
    kill -0 "$sluiced_pid" 2>/dev/null || return 1
    [ "$SECONDS" -lt "$deadline" ] || return 1
    sleep 0.1
  done
}

notes="$tmp/notify.log"
: >"$notes"
python3 tests/integration/notify_listener.py "$tmp/notify.sock" "$notes" --max-seconds 150 &
listener_pid=$!
for _ in $(seq 50); do [ -S "$tmp/notify.sock" ] && break; sleep 0.1; done
[ -S "$tmp/notify.sock" ] || { echo "systemd.sh: the notify listener did not bind" >&2; exit 1; }

# Whether sluiced reaches READY=1 under a bounding set: sets `got` to
# "ready" (then it is stopped with SIGTERM) or "exit N: its last line".
probe() {  # probe BOUNDING_SET 'ATTACH OPTIONS'
  start_sluiced "$1" "$tmp/probe.log" "$2" NOTIFY_SOCKET="$tmp/notify.sock"
  if wait_for "^[0-9.]* pid=$sluiced_pid READY=1" 1 30; then
    kill -TERM "$sluiced_pid"
    wait "$sluiced_pid"
    got=ready
  elif kill -0 "$sluiced_pid" 2>/dev/null; then
    kill -KILL "$sluiced_pid"
    wait "$sluiced_pid" 2>/dev/null
    got="no READY=1 within 30 s"
  else
    wait "$sluiced_pid"
    got="exit $?: $(grep -v '^EAL:\|^TELEMETRY' "$tmp/probe.log" | tail -n 1)"
  fi
  sluiced_pid=""
}

# The bounding set is in force, and each capability in it is needed: without
# any one of them (CAP_IPC_LOCK is AF_XDP's) sluiced does not start. AF_XDP
# starts with the unit's set and the CAP_SYS_ADMIN its comment says to add.
got=""
probe "$(bounding_set)" "--af-packet c1:o1 --workers 2"
if [ "$got" = ready ]; then pass "AF_PACKET with the unit's bounding set and no_new_privs: READY=1"
else fail "AF_PACKET with the unit's bounding set and no_new_privs: $got"; fi
needed=(CAP_NET_RAW CAP_NET_ADMIN CAP_CHOWN)
[ "${#control_group[@]}" -gt 0 ] || { needed=(CAP_NET_RAW CAP_NET_ADMIN); echo "SKIP AF_PACKET without CAP_CHOWN (no nogroup group)"; }
for cap in "${needed[@]}"; do
  probe "$(bounding_set "$cap")" "--af-packet c1:o1 --workers 2"
  if [[ "$got" == exit\ [1-9]* ]]; then pass "AF_PACKET without $cap: $got"; else fail "AF_PACKET without $cap: $got"; fi
done
probe "$(bounding_set),+sys_admin" "--af-xdp c1:o1 --workers 1"
if [ "$got" = ready ]; then pass "AF_XDP with the unit's set and CAP_SYS_ADMIN: READY=1"
else fail "AF_XDP with the unit's set and CAP_SYS_ADMIN: $got"; fi
probe "$(bounding_set)" "--af-xdp c1:o1 --workers 1"
if [[ "$got" == exit\ [1-9]* ]]; then pass "AF_XDP without CAP_SYS_ADMIN: $got"; else fail "AF_XDP without CAP_SYS_ADMIN: $got"; fi
: >"$notes"

# Worker 1 stops looping 9 s after the workers start: time for the reloads
# and a periodic STATUS= first.
stall_after=9
watchdog_usec=1000000
start_sluiced "$(bounding_set)" "$tmp/sluiced.log" "--af-packet c1:o1 --workers 2" NOTIFY_SOCKET="$tmp/notify.sock" \
  WATCHDOG_USEC="$watchdog_usec" SLUICE_TEST_STALL_WORKER="1:$stall_after"
started="$SECONDS"
if wait_for '^[0-9.]* pid=[0-9]* READY=1|STATUS=' 1 30; then
  pass "READY=1 after $((SECONDS - started)) s: $(grep -m1 'READY=1' "$notes" | cut -d' ' -f3-)"
else
  fail "no READY=1 within 30 s; sluiced's log: $(tail -n 5 "$tmp/sluiced.log" | tr '\n' '|')"
  exit 1
fi

# Four reloads: good and broken, by SIGHUP and by the control socket.
reload() {  # reload NAME sighup|sluicectl WANT_EXIT taken|refused
  local n before how="$2" rc=0
  before="$(grep -c 'RELOADING=1' "$notes")"
  if [ "$how" = sighup ]; then kill -HUP "$sluiced_pid"
  else ip netns exec "$ns" "$sluicectl" --socket "$tmp/control.sock" policy reload >"$tmp/ctl.out" 2>&1 || rc=$?; fi
  n=$((before + 1))
  if ! wait_for 'RELOADING=1' "$n" 5 || ! wait_for '^[0-9.]* pid=[0-9]* READY=1' "$((n + 1))" 5; then
    fail "reload $1: no RELOADING=1 and READY=1 within 5 s"; return
  fi
  local pair
  pair="$(grep -E 'RELOADING=1|READY=1' "$notes" | tail -n 2 | cut -d' ' -f3- | tr '\n' '~')"
  if [ "$rc" -ne "$3" ]; then fail "reload $1: sluicectl exit $rc, want $3: $(cat "$tmp/ctl.out")"
  elif [[ "$pair" != RELOADING=1\|MONOTONIC_USEC=*~READY=1\|STATUS=* ]]; then fail "reload $1: got '$pair'"
  elif [ "$4" = refused ]; then
    if [[ "$pair" == *" refused ("* ]]; then pass "reload $1: RELOADING=1, then READY=1 saying refused"
    else fail "reload $1: '$pair' does not say refused"; fi
  elif [[ "$pair" == *" refused ("* ]]; then fail "reload $1: '$pair' says refused"
  else pass "reload $1: RELOADING=1, then READY=1 ($(grep 'READY=1' "$notes" | tail -n 1 | cut -d' ' -f3-))"; fi
}
reload good-sighup sighup 0 taken
reload good-sluicectl sluicectl 0 taken
cp "$tmp/policy.yaml" "$tmp/policy.good"
printf 'sluice: 1\nname: broken\nbuckets:\n  b: { rate: 10/fortnight }\nrules: []\n' >"$tmp/policy.yaml"
reload broken-sighup sighup 0 refused
reload broken-sluicectl sluicectl 1 refused
cp "$tmp/policy.good" "$tmp/policy.yaml"

if wait_for '^[0-9.]* pid=[0-9]* STATUS=policy' 1 $((stall_after + 5)); then
  pass "a periodic STATUS=: $(grep -m1 '^[0-9.]* pid=[0-9]* STATUS=policy' "$notes" | cut -d' ' -f3-)"
else fail "no periodic STATUS= line"; fi

# The stall: its STATUS= line comes within an interval or two of it.
if wait_for 'STATUS=worker 1 made no progress' 1 $((stall_after + 10)); then
  pass "stalled worker reported: $(grep -m1 'STATUS=worker 1' "$notes" | cut -d' ' -f3-)"
else fail "no STATUS= naming the stalled worker within $((stall_after + 10)) s"; fi
sleep $((3 * watchdog_usec / 1000000))
if kill -0 "$sluiced_pid" 2>/dev/null &&
   ip netns exec "$ns" timeout 5 "$sluicectl" --socket "$tmp/control.sock" status >/dev/null 2>&1; then
  pass "sluiced lives on with worker 1 stalled (its control socket answers)"
else fail "sluiced is not alive and answering with worker 1 stalled"; fi

kill -TERM "$sluiced_pid"
for _ in $(seq 150); do kill -0 "$sluiced_pid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$sluiced_pid" 2>/dev/null; then fail "sluiced did not exit within 15 s of SIGTERM"
else
  wait "$sluiced_pid"
  rc=$?
  sluiced_pid_done="$sluiced_pid"
  sluiced_pid=""
  if [ "$rc" -eq 0 ]; then pass "SIGTERM: exit 0"; else fail "SIGTERM: exit $rc: $(tail -n 5 "$tmp/sluiced.log" | tr '\n' '|')"; fi
fi
sleep 0.3

# What the listener heard, in order, timed.
awk -v pid="${sluiced_pid_done:-0}" -v interval="$(awk "BEGIN { print $watchdog_usec / 1e6 }")" '
  { t = $1; sender = substr($2, 5); msg = $0; sub(/^[^ ]+ [^ ]+ /, "", msg) }
  sender != pid { foreign++ }
  msg ~ /^READY=1/ && ready == "" { ready = t; last = t }
  msg ~ /^STATUS=worker 1 made no progress/ && stalled == "" { stalled = t }
  msg == "WATCHDOG=1" {
    if (stalled != "") { after_stall++; next }
    pings++
    if (t - last > gap) gap = t - last
    last = t
  }
  msg ~ /^STOPPING=1\|STATUS=stopping on SIGTERM$/ { stopping = t }
  END {
    printf "pings=%d gap=%.3f after_stall=%d quiet=%.3f stopping=%s foreign=%d\n", pings, gap, after_stall,
      (stalled != "" && stopping != "" ? stopping - stalled : -1), (stopping != "" ? "yes" : "no"), foreign
  }' "$notes" >"$tmp/summary"
read -r pings gap after_stall quiet stopping foreign <"$tmp/summary"
echo "  heard: $(cat "$tmp/summary")"
pings="${pings#pings=}" gap="${gap#gap=}" after_stall="${after_stall#after_stall=}" quiet="${quiet#quiet=}"
stopping="${stopping#stopping=}" foreign="${foreign#foreign=}"
if [ "$pings" -ge 8 ] && awk "BEGIN { exit !($gap < $watchdog_usec / 1e6) }"; then
  pass "WATCHDOG=1 while the workers ran: $pings pings, at most ${gap} s apart (interval $((watchdog_usec / 1000)) ms)"
else fail "WATCHDOG=1 while the workers ran: $pings pings, largest gap ${gap} s (want >= 8, < $((watchdog_usec / 1000)) ms)"; fi
if [ "$after_stall" -eq 0 ] && awk "BEGIN { exit !($quiet >= 3 * $watchdog_usec / 1e6) }"; then
  pass "no WATCHDOG=1 once worker 1 stalled: ${quiet} s of silence until the stop"
else fail "after the stall: $after_stall WATCHDOG=1, ${quiet} s observed"; fi
if [ "$stopping" = yes ]; then pass "STOPPING=1 with STATUS=stopping on SIGTERM"; else fail "no STOPPING=1"; fi
if [ "$foreign" -eq 0 ]; then pass "every notification from sluiced's own pid (NotifyAccess=main)"
else fail "$foreign notifications from another pid than sluiced's ($sluiced_pid_done)"; fi

if [ "$failures" -eq 0 ]; then echo "systemd: all passed"; exit 0; fi
echo "systemd: $failures failed; the notifications:"
sed 's/^/  | /' "$notes"
exit 1
