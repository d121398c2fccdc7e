#!/usr/bin/env bash
# Cluster budgets end to end: two sluiced boxes sharing
# `scope: cluster` budgets through a Redis Cluster (3 primaries, 1 replica
# each, Debian's redis-server), each box on the AF_PACKET PMD between a
# client and an nginx origin, every party in a network namespace of its own:
#
#   client ns                box A ns (IPv6 off)                origin ns
#   c0a 198.18.1.10 --- c1 [sluiced A --af-packet c1:o1] o1 --- o0a 198.18.1.20
#                          m0 198.19.10.11                        nginx :80
#                           |                                     (one ns, both
#                       redis ns: br0 198.19.10.1/24               addresses)
#                       redis-server :7000-7005 (3 primaries + 3 replicas)
#                           |
#                          m0 198.19.10.12
#   c0b 198.18.2.10 --- c1 [sluiced B --af-packet c1:o1] o1 --- o0b 198.18.2.20
#                        box B ns (IPv6 off)
#
# Each box's sync thread reaches Redis over its management veth (m0); the
# AF_PACKET ends c1/o1 are not on that network.
#
#   tests/integration/cluster.sh [BUILD_DIR]     (root; default BUILD_DIR build)
#
# Prints each check as "PASS name: numbers" or "FAIL name: why", with "  #"
# notes of what it saw; exits 0 only if every check passed (2 if it could not
# run at all). Logs of the last run go to BUILD_DIR/integration-cluster/
# (SLUICE_CLUSTER_ARTIFACTS elsewhere). Everything it starts is stopped by
# pid and its namespaces (sltc-PID-*) deleted on exit, on failure and on
# Ctrl-C too; leftovers of a crashed run are removed at the next start.
# Checks read "check && check || fail WHY": fail when either does not hold.
# shellcheck disable=SC2015 source-path=SCRIPTDIR
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
export LC_ALL=C
export PATH="/usr/sbin:/sbin:$PATH"
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY no_proxy NO_PROXY

# shellcheck source=topology.sh
. "$HERE/topology.sh"   # slt_offloads_off, slt_ns_delete, slt_track_pid, slt_kill_tracked, slt_log, SLT_PY
# shellcheck source=redis_lab.sh
. "$HERE/redis_lab.sh"

cd "$REPO" || exit 2
build="${1:-build}"
BUILD_ABS="$(cd "$build" 2>/dev/null && pwd)" || { echo "cluster.sh: no build directory '$build'" >&2; exit 2; }
SLUICED="${SLUICED:-$BUILD_ABS/src/sluiced}"
SLUICECTL="${SLUICECTL:-$BUILD_ABS/src/sluicectl}"
ARTIFACTS="${SLUICE_CLUSTER_ARTIFACTS:-$BUILD_ABS/integration-cluster}"
[ -x "$SLUICED" ] || { echo "cluster.sh: $SLUICED not built" >&2; exit 2; }
[ -x "$SLUICECTL" ] || { echo "cluster.sh: $SLUICECTL not built" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || { echo "cluster.sh: needs root (network namespaces, AF_PACKET)" >&2; exit 2; }
for tool in redis-server redis-cli nginx curl ethtool openssl; do
  command -v "$tool" >/dev/null || { echo "cluster.sh: $tool not installed (scripts/install-deps.sh test)" >&2; exit 2; }
done

# ---------------------------------------------------------------- the numbers

RATE_PER_MIN=60   # both buckets: rate 60/min, burst 20
BURST=20
INTERVAL_MS=20    # sync_interval
BOXES=2
REDIS_HOST=198.19.10.1
REDIS_PORTS=(7000 7001 7002 7003 7004 7005)
A_ORIGIN=198.18.1.20
B_ORIGIN=198.18.2.20

# The overshoot bound tests/integration/README.md documents, in requests: while a sync is on
# its way each other box may have spent its whole burst plus one interval's
# refill unseen, and every box one interval's refill more:
#   (boxes - 1) * (burst + rate * interval) + boxes * rate * interval
OVERSHOOT_EXACT="$(awk -v n=$BOXES -v b=$BURST -v r=$RATE_PER_MIN -v i=$INTERVAL_MS \
  'BEGIN { ri = r / 60 * i / 1000; printf "%.2f", (n - 1) * (b + ri) + n * ri }')"
OVERSHOOT="$(awk -v x="$OVERSHOOT_EXACT" 'BEGIN { print int(x) }')"   # whole requests
# What paced traffic may see beyond one budget: requests 50 ms apart (2.5
# sync intervals) reach a box after its sync brought the other box's last
# spend, so the bound above (simultaneous bursts) is never approached; a
# late sync thread on a loaded machine may let a refilled token be taken on
# both boxes now and then. Asserted where the traffic is paced so.
PACED=5

# ---------------------------------------------------------------- the lab

P="sltc-$$"
NS_CLI="$P-cli" NS_A="$P-boxa" NS_B="$P-boxb" NS_ORG="$P-org" NS_R="$P-redis"
ALL_NS=("$NS_CLI" "$NS_A" "$NS_B" "$NS_ORG" "$NS_R")

# Leftovers of crashed runs: sltc-PID-* namespaces and /tmp/sltc-PID.* dirs
# whose run is gone.
clean_stale() {
  local name pid d
  for name in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E '^sltc-[0-9]+-(cli|boxa|boxb|org|redis)$'); do
    pid="${name#sltc-}" pid="${pid%%-*}"
    if ! kill -0 "$pid" 2>/dev/null; then
      slt_log "removing stale namespace $name (run $pid is gone)"
      slt_ns_delete "$name"
    fi
  done
  for d in /tmp/sltc-[0-9]*.*; do
    [ -d "$d" ] || continue
    pid="${d#/tmp/sltc-}" pid="${pid%%.*}"
    kill -0 "$pid" 2>/dev/null || rm -rf "$d"
  done
}
clean_stale

SLT_TMP="$(mktemp -d "/tmp/$P.XXXXXX")"
mkdir -p "$SLT_TMP/pids" "$SLT_TMP/out"
export SLT_TMP
OUT="$SLT_TMP/out"

declare -A SLUICED_PID=() SLUICED_LOG=() SOCK=()
NGINX_PID=""
TORN_DOWN=0
STARTED=()   # every pid this run started (sluiced, nginx; redis_lab keeps RL_STARTED)

# Stops one box: SIGTERM, up to 10 s to exit; BOX_STATUS says how it ended
# (its exit status). Runs in this shell (sluiced is its child).
BOX_STATUS=""
box_stop() {
  local box="$1" pid="${SLUICED_PID[$1]:-}" i
  BOX_STATUS="not running"
  [ -n "$pid" ] || return 0
  kill -TERM "$pid" 2>/dev/null
  for ((i = 0; i < 100; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then
    kill -KILL "$pid" 2>/dev/null
    { wait "$pid"; } 2>/dev/null
    BOX_STATUS="killed: still running 10 s after SIGTERM"
  else
    wait "$pid" 2>/dev/null
    BOX_STATUS=$?
  fi
  rm -f "$SLT_TMP/pids/$pid"
  SLUICED_PID[$box]=""
}

teardown() {
  [ "$TORN_DOWN" = 1 ] && return 0
  TORN_DOWN=1
  local b ns
  for b in A B; do [ -n "${SLUICED_PID[$b]:-}" ] && box_stop "$b"; done
  if [ -n "$NGINX_PID" ]; then
    kill -TERM "$NGINX_PID" 2>/dev/null
    { wait "$NGINX_PID"; } 2>/dev/null
    rm -f "$SLT_TMP/pids/$NGINX_PID"
    NGINX_PID=""
  fi
  redis_lab_kill_all
  slt_kill_tracked                      # anything else this run started
  for ns in "${ALL_NS[@]}"; do slt_ns_delete "$ns"; done
  # The logs of this run, for CI's artifacts (not the secret, not sockets).
  if [ -n "$ARTIFACTS" ] && rm -rf "$ARTIFACTS" 2>/dev/null && mkdir -p "$ARTIFACTS" 2>/dev/null; then
    (cd "$SLT_TMP" && find . -type f \( -name '*.log' -o -name '*.yaml' -o -name '*.conf' -o -path './out/*' \) \
      ! -name secret -print0 | xargs -0 -r cp --parents -t "$ARTIFACTS" 2>/dev/null)
  fi
  rm -rf "$SLT_TMP"
}
trap teardown EXIT
trap 'echo "cluster.sh: interrupted" >&2; exit 130' INT
trap 'echo "cluster.sh: terminated" >&2; exit 143' TERM

die_setup() {
  echo "FAIL cluster-setup: $*"
  exit 1
}

in_ns() { local ns="$1"; shift; ip netns exec "$ns" "$@"; }

lab_up() {
  local ns side ifc
  for ns in "${ALL_NS[@]}"; do
    ip netns add "$ns" || return 1
    ip -n "$ns" link set lo up || return 1
    # IPv4 only here (the boxes' namespaces above all: nothing of the host
    # may reach c1/o1), set before the links exist so they are born without it.
    in_ns "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1 || return 1
  done
  ip -n "$NS_A" link add c1 type veth peer name c0a netns "$NS_CLI" || return 1
  ip -n "$NS_A" link add o1 type veth peer name o0a netns "$NS_ORG" || return 1
  ip -n "$NS_B" link add c1 type veth peer name c0b netns "$NS_CLI" || return 1
  ip -n "$NS_B" link add o1 type veth peer name o0b netns "$NS_ORG" || return 1
  for ns in "$NS_A" "$NS_B"; do
    # The boxes' kernels answer no ARP on the appliance's ends (they hold no
    # address there; the management address is on m0 only).
    in_ns "$ns" sysctl -qw net.ipv4.conf.c1.arp_ignore=8 net.ipv4.conf.o1.arp_ignore=8 >/dev/null 2>&1 || true
  done
  for side in "$NS_CLI:c0a" "$NS_CLI:c0b" "$NS_A:c1" "$NS_A:o1" "$NS_B:c1" "$NS_B:o1" "$NS_ORG:o0a" "$NS_ORG:o0b"; do
    ns="${side%%:*}" ifc="${side##*:}"
    slt_offloads_off "$ns" "$ifc" || return 1
    ip -n "$ns" link set dev "$ifc" promisc on up || return 1
  done
  ip -n "$NS_CLI" addr add 198.18.1.10/24 dev c0a || return 1
  ip -n "$NS_CLI" addr add 198.18.2.10/24 dev c0b || return 1
  ip -n "$NS_ORG" addr add "$A_ORIGIN/24" dev o0a || return 1
  ip -n "$NS_ORG" addr add "$B_ORIGIN/24" dev o0b || return 1

  # The management network: a bridge in the Redis namespace, a veth from
  # each box's namespace into it.
  ip -n "$NS_R" link add br0 type bridge stp_state 0 forward_delay 0 mcast_snooping 0 || return 1
  ip -n "$NS_R" addr add "$REDIS_HOST/24" dev br0 || return 1
  ip -n "$NS_R" link set dev br0 up || return 1
  ip -n "$NS_A" link add m0 type veth peer name ma netns "$NS_R" || return 1
  ip -n "$NS_B" link add m0 type veth peer name mb netns "$NS_R" || return 1
  for ifc in ma mb; do
    ip -n "$NS_R" link set dev "$ifc" master br0 || return 1
    ip -n "$NS_R" link set dev "$ifc" up || return 1
  done
  ip -n "$NS_A" addr add 198.19.10.11/24 dev m0 || return 1
  ip -n "$NS_B" addr add 198.19.10.12/24 dev m0 || return 1
  ip -n "$NS_A" link set dev m0 up || return 1
  ip -n "$NS_B" link set dev m0 up || return 1
}

origin_up() {
  local d="$SLT_TMP/nginx" i
  mkdir -p "$d/tmp"
  cat >"$d/nginx.conf" <<EOF
# Generated by tests/integration/cluster.sh for one run.
user root;
worker_processes 1;
daemon off;
master_process on;
pid $d/nginx.pid;
error_log $d/error.log warn;
events { worker_connections 256; }
http {
  client_body_temp_path $d/tmp/body;
  proxy_temp_path $d/tmp/proxy;
  fastcgi_temp_path $d/tmp/fastcgi;
  uwsgi_temp_path $d/tmp/uwsgi;
  scgi_temp_path $d/tmp/scgi;
  default_type text/plain;
  server_tokens off;
  keepalive_requests 1000000;
  keepalive_timeout 120s;
  # 1 client address  2 method  3 URI  4 status  5 msec
  log_format sltc '\$remote_addr \$request_method \$request_uri \$status \$msec';
  access_log $d/access.log sltc;
  server {
    listen 80 default_server;
    location = /healthz { access_log off; return 200 "healthy\n"; }
    location / { return 200 "ok\n"; }
  }
}
EOF
  ip netns exec "$NS_ORG" nginx -p "$d/" -c "$d/nginx.conf" -e "$d/error.log" >"$d/stdout.log" 2>&1 </dev/null &
  NGINX_PID=$!
  slt_track_pid "$NGINX_PID"
  STARTED+=("$NGINX_PID")
  for ((i = 0; i < 100; i++)); do
    kill -0 "$NGINX_PID" 2>/dev/null || { echo "nginx exited at start: $(tail -n 5 "$d/stdout.log" "$d/error.log" 2>/dev/null | tr '\n' ' ')"; return 1; }
    in_ns "$NS_ORG" curl --noproxy '*' -sf -o /dev/null --max-time 1 "http://$A_ORIGIN/healthz" &&
      in_ns "$NS_ORG" curl --noproxy '*' -sf -o /dev/null --max-time 1 "http://$B_ORIGIN/healthz" && return 0
    sleep 0.1
  done
  echo "nginx did not answer within 10 s"
  return 1
}

write_policy() {  # write_policy FILE
  local seeds="" p
  for p in "${REDIS_PORTS[@]}"; do seeds+="${seeds:+, }\"$REDIS_HOST:$p\""; done
  cat >"$1" <<EOF
# Written by tests/integration/cluster.sh: one budget shared by both boxes
# (scope: cluster, /shared/...), one each box keeps alone (scope: box, /own/...),
# both per credential.
sluice: 1
name: cluster-it
header_style: seed
service_ports: [80]
after_answer: keep-alive
credentials:
  header: Authorization
exempt:
  - methods: [GET, HEAD]
    path: /healthz
cluster:
  redis: [$seeds]
  key_prefix: sluice
  sync_interval: ${INTERVAL_MS}ms
  fallback: local-share
  boxes: $BOXES
  secret_file: $SLT_TMP/secret
  username: $RL_USER
  password_file: $SLT_TMP/redis.pw
  tls:
    ca_file: $RL_TLS_DIR/ca.crt
buckets:
  shared: { rate: $RATE_PER_MIN/min, burst: $BURST, scope: cluster }
  own:    { rate: $RATE_PER_MIN/min, burst: $BURST, scope: box }
  run:    { rate: 600/min, burst: 600, scope: cluster }
  rpm:    { window: minute, requests: 10, tokens: 1000, scope: cluster }
  bare:   { rate: 600/min, burst: 600 }
  boxedb: { rate: 1/hour, burst: 1, scope: cluster }
rules:
  - name: boxed
    path: "/boxed/{who}/*"
    key: { path_param: who }
    bucket: boxedb
    penalty: { after: 2, within: 1h, for: 1h }
  - name: rpm
    path: "/rpm/{deployment}/*"
    key: { path_param: deployment }
    bucket: rpm
  - name: run
    path: "/runs/{run}/*"
    live_run: run
    key: { path_param: run }
    bucket: run
  - name: ended-run
    path: "/runs/{run}/*"
    key: client_ip
    bucket: bare
    answer: 404
  - name: own
    path: "/own/*"
    require: [Authorization]
    key: credential
    bucket: own
  - name: shared
    path: "/shared/*"
    require: [Authorization]
    key: credential
    bucket: shared
EOF
}

# box_start A|B: sluiced in the box's namespace, its own control socket,
# state directory and log (metrics on the namespace's own 127.0.0.1:9464);
# ready when a request from the client reaches the origin through it.
box_start() {
  local box="$1" ns origin deadline code lc
  lc="$(tr 'AB' 'ab' <<<"$box")"
  if [ "$box" = A ]; then ns="$NS_A" origin="$A_ORIGIN"; else ns="$NS_B" origin="$B_ORIGIN"; fi
  SOCK[$box]="$SLT_TMP/control-$lc.sock"
  SLUICED_LOG[$box]="$SLT_TMP/sluiced-$lc.log"
  # `ip netns exec` itself, not a function: a function sent to the
  # background runs in a subshell, and $! would be that shell's pid.
  ip netns exec "$ns" "$SLUICED" --config "$SLT_TMP/policy-$lc.yaml" --af-packet c1:o1 --workers 1 --memory 256 \
    --control-socket "${SOCK[$box]}" --metrics 127.0.0.1:9464 --state-dir "$SLT_TMP/state-$lc" \
    >"${SLUICED_LOG[$box]}" 2>&1 </dev/null &
  SLUICED_PID[$box]=$!   # `ip netns exec` execs in place: sluiced's own pid
  slt_track_pid "${SLUICED_PID[$box]}"
  STARTED+=("${SLUICED_PID[$box]}")
  deadline=$((SECONDS + ${SLUICE_READY_TIMEOUT:-20}))
  while :; do
    if ! kill -0 "${SLUICED_PID[$box]}" 2>/dev/null; then
      wait "${SLUICED_PID[$box]}" 2>/dev/null
      echo "sluiced $box exited (status $?) at start: $(tail -n 20 "${SLUICED_LOG[$box]}" | tr '\n' '|')"
      SLUICED_PID[$box]=""
      return 1
    fi
    code="$(in_ns "$NS_CLI" curl --noproxy '*' -sS -o /dev/null -w '%{http_code}' --connect-timeout 1 --max-time 1 \
      "http://$origin/healthz" 2>/dev/null)"
    [ "$code" = 200 ] && return 0
    if [ "$SECONDS" -ge "$deadline" ]; then
      echo "sluiced $box not forwarding after ${SLUICE_READY_TIMEOUT:-20}s: $(tail -n 20 "${SLUICED_LOG[$box]}" | tr '\n' '|')"
      return 1
    fi
    sleep 0.2
  done
}

# ---------------------------------------------------------------- observing

# cstats A|B: the box's `cluster` stats as "key=value ..." on one line.
cstats() {
  timeout -k 1 10 "$SLUICECTL" --socket "${SOCK[$1]}" --json stats 2>/dev/null | "$SLT_PY" -c '
import json, sys
try:
    c = json.load(sys.stdin).get("cluster") or {}
except ValueError:
    c = {}
print(" ".join("%s=%s" % (k, str(v).replace(" ", "_") or "-") for k, v in c.items() if not isinstance(v, (dict, list))))'
}
# kv FIELD "LINE": a field of a cstats line (empty if absent).
kv() { tr ' ' '\n' <<<"$2" | awk -F= -v k="$1" '$1 == k { print substr($0, length(k) + 2); exit }'; }
cstat() { kv "$2" "$(cstats "$1")"; }

# wait_state A|B STATE SECONDS: until the box's cluster state is STATE;
# prints the seconds it took (or "never").
wait_state() {
  local box="$1" want="$2" t0 now
  t0="$(date +%s.%N)"
  while :; do
    now="$(date +%s.%N)"
    if [ "$(cstat "$box" state)" = "$want" ]; then awk -v a="$t0" -v b="$now" 'BEGIN { printf "%.2f", b - a }'; return 0; fi
    awk -v a="$t0" -v b="$now" -v s="$3" 'BEGIN { exit !(b - a > s) }' && { echo never; return 1; }
    sleep 0.05
  done
}

log_count() { grep -c -- "$2" "${SLUICED_LOG[$1]}" 2>/dev/null; }

# The traffic: one client process in the client namespace, requests paced
# at a fixed interval, each to box A (a) or box B (b) as SEQ says, on one
# keep-alive connection per box, every one with "Authorization: Bearer
# TOKEN". One line per request: index, box, status (0: no answer), seconds
# since the first request. Requests are never closer together than the
# interval (a stalled client does not catch up in a burst).
cat >"$SLT_TMP/traffic.py" <<'EOF'
import http.client, sys, time
seq, interval, token, path, limit = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4], float(sys.argv[5])
hosts = {"a": "198.18.1.20", "b": "198.18.2.20"}
conns = {}
start = time.monotonic()
last = None
for i, box in enumerate(seq):
    # Never closer than the interval, even after a stall: a client that
    # fell behind sends on at its pace, it does not catch up in a burst.
    due = start + i * interval if last is None else max(start + i * interval, last + interval)
    now = time.monotonic()
    if now - start > limit:
        print("# out of time after %d requests" % i, flush=True)
        break
    if due > now:
        time.sleep(due - now)
    last = time.monotonic()
    t = last - start
    status = 0
    c = conns.get(box) or http.client.HTTPConnection(hosts[box], 80, timeout=3)
    conns[box] = c
    try:
        c.request("GET", "%s?i=%d" % (path, i), headers={"Authorization": "Bearer " + token})
        r = c.getresponse()
        r.read()
        status = r.status
        if r.will_close:
            c.close()
            conns.pop(box, None)
    except (OSError, http.client.HTTPException) as e:
        print("# request %d to %s: %s" % (i, box, e), flush=True)
        c.close()
        conns.pop(box, None)
    print("%d %s %d %.3f" % (i, box, status, t), flush=True)
EOF

# traffic NAME SEQ INTERVAL TOKEN PATH: runs the client (bounded) into $OUT/NAME.
traffic() {
  local limit
  limit="$(awk -v n="${#2}" -v i="$3" 'BEGIN { printf "%d", n * i + 10 }')"
  in_ns "$NS_CLI" timeout -k 2 "$((limit + 10))" "$SLT_PY" "$SLT_TMP/traffic.py" "$2" "$3" "$4" "$5" "$limit" \
    >"$OUT/$1.txt" 2>"$OUT/$1.stderr"
}
# tally NAME: "a200 a429 b200 b429 other T" (T: seconds from the first request to the last).
tally() {
  awk '!/^#/ && NF == 4 {
      n[$2 $3]++; if ($3 != 200 && $3 != 429) o++
      if (first == "") first = $4; last = $4 }
    END { printf "%d %d %d %d %d %.3f\n", n["a200"], n["a429"], n["b200"], n["b429"], o, last - first }' "$OUT/$1.txt"
}
# seq_of PATTERN COUNT: PATTERN repeated COUNT times.
seq_of() { local s="" i; for ((i = 0; i < $2; i++)); do s+="$1"; done; echo "$s"; }
# The origin's lines for a URI prefix from a client address (once nginx has written them).
olog_count() {
  sleep 0.3
  awk -v a="$1" -v u="$2" '$1 == a && index($3, u) == 1 { n++ } END { print n + 0 }' "$SLT_TMP/nginx/access.log"
}
refill() {  # refill T: whole tokens the rate adds in T seconds (floor)
  awk -v t="$1" -v r=$RATE_PER_MIN 'BEGIN { printf "%d", t * r / 60 }'
}

# ---------------------------------------------------------------- checks

FAILS=()
CHECK=""
declare -A RESULT=()
ORDER=()
fail() { FAILS+=("$*"); }
note() { printf '  # %s\n' "$*"; }
check_begin() { CHECK="$1"; FAILS=(); printf -- '-- %s\n' "$1"; }
check_end() {  # check_end SUMMARY
  ORDER+=("$CHECK")
  if [ ${#FAILS[@]} -eq 0 ]; then
    RESULT[$CHECK]=PASS
    echo "PASS $CHECK: $1"
  else
    RESULT[$CHECK]=FAIL
    local IFS=';'
    echo "FAIL $CHECK: ${FAILS[*]}"
  fi
}
le() { [[ "$1" =~ ^-?[0-9]+$ ]] && [ "$1" -le "$2" ]; }
ge() { [[ "$1" =~ ^-?[0-9]+$ ]] && [ "$1" -ge "$2" ]; }
# Tokens: one per check, fresh for this run (their keys are new in Redis).
tok() { echo "sltc-$$-$1-$RANDOM$RANDOM"; }

# ---------------------------------------------------------------- setup

T_START=$SECONDS
echo "cluster.sh: sluiced $SLUICED; rate ${RATE_PER_MIN}/min, burst $BURST, sync ${INTERVAL_MS}ms, boxes $BOXES, fallback local-share"
echo "cluster.sh: overshoot bound (boxes-1)*(burst+rate*interval) + boxes*rate*interval = $OVERSHOOT_EXACT -> $OVERSHOOT requests"

# Each setup step runs in this shell (what it starts is its child, stopped by
# pid); what it says goes to a file.
setup() {
  "$@" >"$SLT_TMP/why" 2>&1 || die_setup "$1: $(tr '\n' ' ' <"$SLT_TMP/why")"
}
now() { echo "$EPOCHREALTIME"; }
since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }'; }

setup lab_up
setup origin_up
head -c 64 /dev/urandom >"$SLT_TMP/secret"
chmod 600 "$SLT_TMP/secret"
# Both boxes keep one credential secret (the operator copies one box's
# credential.secret into the others' state directories before their first
# start): credential hashes mean the same on both, so the map replicates.
for lc in a b; do
  mkdir -m 0700 "$SLT_TMP/state-$lc"
done
head -c 192 /dev/urandom >"$SLT_TMP/state-a/credential.secret"
chmod 600 "$SLT_TMP/state-a/credential.secret"
cp -p "$SLT_TMP/state-a/credential.secret" "$SLT_TMP/state-b/credential.secret"
# Redis as production runs it: AUTH required, and sluiced in as an ACL
# user confined to its key prefix (every check below syncs through it).
RL_PASS="lab-admin-$RANDOM$RANDOM" RL_USER=sluice RL_USER_PASS="sluice-$RANDOM$RANDOM" RL_USER_KEYS='sluice:*'
printf '%s\n' "$RL_USER_PASS" >"$SLT_TMP/redis.pw"
chmod 0600 "$SLT_TMP/redis.pw"
# ... and over TLS only (clients, replication, the cluster bus): a CA and
# one certificate for the nodes' address, made here.
RL_TLS_DIR="$SLT_TMP/tls"
mkdir -p "$RL_TLS_DIR"
(
  cd "$RL_TLS_DIR" &&
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 -subj /CN=cluster-it-ca &&
    openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj /CN=redis.cluster-it &&
    printf 'subjectAltName=DNS:redis.cluster-it,IP:%s\n' "$REDIS_HOST" >server.ext &&
    openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out server.crt -days 2 -extfile server.ext
) >"$SLT_TMP/openssl.log" 2>&1 || die_setup "openssl: $(tail -n 3 "$SLT_TMP/openssl.log" | tr '\n' ' ')"
write_policy "$SLT_TMP/policy-a.yaml"
write_policy "$SLT_TMP/policy-b.yaml"
"$SLUICED" --check-config "$SLT_TMP/policy-a.yaml" >"$SLT_TMP/why" 2>&1 || die_setup "policy: $(tr '\n' ' ' <"$SLT_TMP/why")"
redis_lab_init "$NS_R" "$REDIS_HOST" "$SLT_TMP/redis" "${REDIS_PORTS[@]}"
t0="$(now)"
setup redis_lab_start
setup redis_lab_create 1
echo "cluster.sh: Redis Cluster of ${#REDIS_PORTS[@]} nodes ok in $(since "$t0")s: primaries $(redis_lab_primaries | tr '\n' ' ')"
setup box_start A
setup box_start B
echo "cluster.sh: sluiced A (pid ${SLUICED_PID[A]}) and B (pid ${SLUICED_PID[B]}) forwarding"
# Both boxes reach Redis: a request on each with a throwaway token, and
# each box's sync has sent a key (bounded).
traffic warm ab 0.05 "$(tok warm)" /shared/warm
for b in A B; do
  for ((i = 0; i < 100; i++)); do
    s="$(cstats "$b")"
    ge "$(kv keys_sent "$s")" 1 && [ "$(kv state "$s")" = synced ] && break
    sleep 0.1
  done
  ge "$(kv keys_sent "$s")" 1 || die_setup "box $b sent nothing to Redis within 10 s: $s"
done
echo "cluster.sh: both boxes synced with Redis ($(since "$t0")s since the Redis start)"

# 0. Redis wants AUTH: the boxes came in as the ACL user confined to
# sluice's key prefix (their syncs above went through it), the check says
# so, and that user can touch no other key.
check_begin cluster-redis-auth
out="$(in_ns "$NS_A" "$SLUICED" --check-config "$SLT_TMP/policy-a.yaml" --connect 2>&1)"
grep -q "cluster redis answered, over TLS, authenticated as sluice" <<<"$out" || fail "--check-config --connect: $out"
first="$(redis_lab_primaries | head -n 1)"
tls_cli=(--tls --cacert "$RL_TLS_DIR/ca.crt")
out="$(timeout 10 ip netns exec "$NS_R" redis-cli "${tls_cli[@]}" -h "$REDIS_HOST" -p "$first" --user "$RL_USER" \
  --pass "$RL_USER_PASS" --no-auth-warning SET not-sluice:x 1 2>&1)"
grep -q NOPERM <<<"$out" || fail "the ACL user could write outside its prefix: $out"
out="$(timeout 10 ip netns exec "$NS_R" redis-cli "${tls_cli[@]}" -h "$REDIS_HOST" -p "$first" PING 2>&1)"
grep -q NOAUTH <<<"$out" || fail "Redis answered without AUTH: $out"
out="$(timeout 10 ip netns exec "$NS_R" redis-cli -h "$REDIS_HOST" -p "$first" --no-auth-warning -a "$RL_PASS" PING 2>&1)"
grep -q PONG <<<"$out" && fail "Redis answered in plain text: $out"
check_end "boxes synced over TLS as ACL user $RL_USER (~$RL_USER_KEYS); --check-config --connect says so; NOPERM outside the prefix, NOAUTH without credentials, no plain text"

# 1. One token, alternating between the boxes: one budget, and the same
# traffic on a box-scope bucket gets one budget per box.
check_begin cluster-shared-budget
traffic shared "$(seq_of ab 60)" 0.05 "$(tok shared)" /shared/c1
read -r a200 a429 b200 b429 other T <<<"$(tally shared)"
total=$((a200 + b200))
base=$((BURST + $(refill "$T")))
note "scope cluster: 120 requests alternating A/B over ${T}s: A $a200 x200 $a429 x429, B $b200 x200 $b429 x429, other $other; admitted $total"
note "one budget over ${T}s: burst + rate*T = $BURST + $(refill "$T") = $base; asserting $((base - 2)) <= $total <= $base + $OVERSHOOT (overshoot bound) = $((base + OVERSHOOT)), and, this traffic being paced, <= $base + $PACED"
[ "$other" -eq 0 ] || fail "$other requests got neither 200 nor 429 (see $OUT/shared.txt)"
ge "$total" $((base - 2)) || fail "admitted $total < $((base - 2)) (burst + rate*T - 2)"
le "$total" $((base + OVERSHOOT)) || fail "admitted $total > $((base + OVERSHOOT)) (burst + rate*T + overshoot bound $OVERSHOOT_EXACT)"
oa="$(olog_count 198.18.1.10 /shared/c1)" ob="$(olog_count 198.18.2.10 /shared/c1)"
[ "$oa" = "$a200" ] && [ "$ob" = "$b200" ] || fail "origin log: A $oa, B $ob lines, the client got A $a200, B $b200 admitted"
traffic own "$(seq_of ab 60)" 0.05 "$(tok own)" /own/c1
read -r oa200 oa429 ob200 ob429 oother oT <<<"$(tally own)"
own_total=$((oa200 + ob200))
own_base=$((2 * (BURST + $(refill "$oT"))))
note "scope box, same traffic over ${oT}s: A $oa200 x200 $oa429 x429, B $ob200 x200 $ob429 x429; admitted $own_total, each box its own budget: 2 x (burst + rate*T) = $own_base"
[ "$oother" -eq 0 ] || fail "$oother box-scope requests got neither 200 nor 429"
ge "$own_total" $((own_base - 4)) && le "$own_total" $((own_base + 2)) || fail "box scope admitted $own_total, want $((own_base - 4))..$((own_base + 2))"
le "$total" $((base + PACED)) || fail "admitted $total > $((base + PACED)): burst + rate*T + $PACED for paced traffic (see PACED)"
ge "$((own_total - total))" $((BURST - 4)) || fail "box scope admitted $own_total, cluster scope $total: want at least $((BURST - 4)) more on the box scope (a burst per box)"
check_end "cluster $total (A $a200 + B $b200) in [$((base - 2)), $((base + OVERSHOOT))], box scope $own_total (A $oa200 + B $ob200) ~ 2 x $((own_base / 2))"

# 2. A token that spent its burst on A, then on B: B admits only what
# arrives before its first sync with the key brings A's lead.
check_begin cluster-spent-elsewhere
t="$(tok elsewhere)"
pub0="$(cstat B keys_published)"
tstart="$(now)"
traffic elsewhereA "$(seq_of a 21)" 0.01 "$t" /shared/c2
read -r a200 a429 _ _ _ _ <<<"$(tally elsewhereA)"
note "A: 21 requests 10 ms apart: $a200 x200, $a429 x429"
[ "$a200" = "$BURST" ] && [ "$a429" = 1 ] || fail "A admitted $a200 and refused $a429 of 21, want $BURST and 1"
sleep 0.2   # ten sync intervals: A's spends are in Redis
traffic elsewhereB "$(seq_of b 20)" 0.01 "$t" /shared/c2
elapsed="$(since "$tstart")"
read -r _ _ b200 b429 bother _ <<<"$(tally elsewhereB)"
# B's admissions after its first refusal (a token refilled meanwhile may be one).
late="$(awk '!/^#/ && NF == 4 { if ($3 == 429) r = 1; else if (r && $3 == 200) n++ } END { print n + 0 }' "$OUT/elsewhereB.txt")"
first429="$(awk '!/^#/ && NF == 4 && $3 == 429 { print $4 * 1000; exit }' "$OUT/elsewhereB.txt")"
pub1="$(cstat B keys_published)"
note "B: 20 requests 10 ms apart: $b200 x200, $b429 x429 (first refusal at +${first429:-none} ms), $late admitted after the first refusal; ${elapsed}s since A's first request (refill $(refill "$elapsed"))"
note "B does not read a key until it has spent on it: its first admission goes out with its next sync (<= 20 ms, plus the round trip), whose answer publishes A's lead; at 10 ms apart that is 2-3 requests, asserting <= 5 for a late sync thread on a busy machine"
note "B keys_published $pub0 -> $pub1"
[ "$bother" -eq 0 ] || fail "$bother requests got neither 200 nor 429"
ge "$b200" 1 && le "$b200" 5 || fail "B admitted $b200, want 1..5"
le "$late" "$(refill "$elapsed")" || fail "B admitted $late after its first refusal, want at most the $(refill "$elapsed") token(s) refilled in ${elapsed}s"
ge "$b429" 10 || fail "B refused only $b429 of 20"
ge "$((pub1 - pub0))" 1 || fail "B's keys_published did not grow ($pub0 -> $pub1)"
check_end "A $a200/21, then B $b200/20 (first 429 at +${first429:-none} ms), B keys_published +$((pub1 - pub0))"

# R. Runs and credentials replicated: a run started on box A paces requests
# on box B (its own budget, TB17's shape: N back to back, then 429); ended on
# B, A answers 404 for it (TB13); a credential added on A is B's too. Each
# change is seen on the other box within the bound docs/cluster.md states (one
# sync interval plus a grace period; asserted with 2 s of slack for this
# machine), and the time it took is printed.
ctl() { local box="$1"; shift; timeout -k 1 10 "$SLUICECTL" --socket "${SOCK[$box]}" "$@"; }
# wait_for A|B SECONDS COMMAND...: until COMMAND (run on the box's sluicectl
# --json) prints something grep -q "$WANT" finds; prints the seconds (or never).
wait_for() {
  local box="$1" limit="$2" t0
  shift 2
  t0="$(now)"
  while :; do
    ctl "$box" --json "$@" 2>/dev/null | grep -q -- "$WANT" && { since "$t0"; return 0; }
    awk -v a="$t0" -v b="$EPOCHREALTIME" -v s="$limit" 'BEGIN { exit !(b - a > s) }' && { echo never; return 1; }
    sleep 0.02
  done
}
check_begin cluster-runs-and-credentials
run="$(tok run)"
ctl A run start "$run" --budget 5 >"$OUT/run-start.txt" 2>&1 || fail "run start on A: $(cat "$OUT/run-start.txt")"
WANT="\"$run\"" seen_b="$(wait_for B 3 runs)" || fail "run $run started on A not live on B within 3 s"
note "run started on A live on B after ${seen_b}s"
traffic run "$(seq_of b 8)" 0.05 "$(tok unused)" "/runs/$run/v1/x"
read -r _ _ r200 r429 rother _ <<<"$(tally run)"
note "8 requests on the run through B: $r200 x200, $r429 x429, other $rother (its own budget: 5 back to back)"
[ "$r200" = 5 ] && [ "$r429" = 3 ] || fail "the run's own budget on B: $r200 admitted, $r429 refused of 8, want 5 and 3"
ctl B run end "$run" >"$OUT/run-end.txt" 2>&1 || fail "run end on B: $(cat "$OUT/run-end.txt")"
WANT='"runs": \[\]\|"runs":\[\]' gone_a="$(wait_for A 3 runs)" || fail "run $run ended on B still live on A after 3 s"
note "run ended on B gone from A after ${gone_a}s"
traffic ended "a" 0.05 "$(tok unused)" "/runs/$run/v1/x"
read -r e200 _ _ _ eother _ <<<"$(tally ended)"
[ "$eother" = 1 ] && [ "$e200" = 0 ] || fail "after the end, A answered $(awk '!/^#/ {print $3}' "$OUT/ended.txt") for the run, want 404"
hash="$(printf 'Bearer %s' "$(tok cred)" | ctl A credential hash 2>/dev/null | grep -oE '[0-9a-f]{32}' | head -n 1)"
[ -n "$hash" ] || fail "no credential hash from A"
ctl A credential add "$hash" alice >"$OUT/cred-add.txt" 2>&1 || fail "credential add on A: $(cat "$OUT/cred-add.txt")"
WANT='"alice"' cred_b="$(wait_for B 3 credentials show)" || fail "credential added on A not on B within 3 s"
note "credential added on A on B after ${cred_b}s; B says credentials $(ctl B --json stats | grep -o '"credentials": *"[^"]*"' | head -n 1)"
check_end "run A->B in ${seen_b}s, paced on B ($r200 of 8), ended on B and gone from A in ${gone_a}s (A answers 404 then), credential A->B in ${cred_b}s"

# P. A penalty box of a rule whose bucket the cluster shares is the
# cluster's: a key boxed on A (1 an hour, boxed after 2 refusals) is listed
# on B within one sync interval plus a grace period, and B refuses it as
# boxed (its bucket not consulted: penalty_refused); released on B, it is
# gone from A's list too.
counter_of() {  # counter_of A|B NAME: a worker counter's total
  ctl "$1" --json stats 2>/dev/null | "$SLT_PY" -c 'import json,sys; print(int(json.load(sys.stdin)["counters"].get(sys.argv[1], 0)))' "$2"
}
check_begin cluster-penalty-box
who="$(tok who)"
traffic boxing "aaaa" 0.05 "$(tok unused)" "/boxed/$who/x"
read -r pa200 pa429 _ _ pother _ <<<"$(tally boxing)"
note "4 requests for $who on A: $pa200 x200, $pa429 x429, other $pother"
[ "$pa200" = 1 ] && [ "$pa429" = 3 ] || fail "A: $pa200 admitted, $pa429 refused of 4, want 1 and 3"
WANT="$who" boxed_b="$(wait_for B 3 penalty list)" || fail "the key boxed on A is not in B's penalty list within 3 s"
note "boxed on A, listed on B after ${boxed_b}s: $(ctl B penalty list 2>&1 | tail -n 1)"
pr0="$(counter_of B penalty_refused)"
traffic boxed-b "b" 0.05 "$(tok unused)" "/boxed/$who/x"
read -r _ _ pb200 pb429 _ _ <<<"$(tally boxed-b)"
pr1="$(counter_of B penalty_refused)"
[ "$pb429" = 1 ] && [ $((pr1 - pr0)) = 1 ] || fail "B: $pb200 x200 $pb429 x429, penalty_refused +$((pr1 - pr0)); want one refusal by the box"
ctl B penalty release boxed "$who" >"$OUT/penalty-release.txt" 2>&1 || fail "penalty release on B: $(cat "$OUT/penalty-release.txt")"
WANT='"boxes": *\[\]' gone_a="$(wait_for A 3 penalty list)" || fail "released on B, still boxed on A after 3 s"
check_end "boxed on A, on B's list after ${boxed_b}s and refused there as boxed; released on B, gone from A after ${gone_a}s"

# W. A calendar-minute window shared (DQ02-DQ05 across boxes): one
# deployment's 10 requests a minute, alternating between the boxes, are 10
# in all (plus what arrives within one sync interval); tokens reported on A
# (usage report, DQ05) refuse the deployment on B once B syncs.
check_begin cluster-window
# Inside one minute: wait while fewer than 15 s of it are left (bounded).
for ((i = 0; i < 160 && $(date +%S | sed 's/^0//') > 44; i++)); do sleep 0.1; done
dep="$(tok dep)"
traffic window "$(seq_of ab 15)" 0.05 "$(tok unused)" "/rpm/$dep/v1/x"
read -r wa200 wa429 wb200 wb429 wother wT <<<"$(tally window)"
wtotal=$((wa200 + wb200))
note "30 requests alternating A/B over ${wT}s on one deployment: A $wa200 x200 $wa429 x429, B $wb200 x200 $wb429 x429, other $wother; admitted $wtotal of 10 a minute"
[ "$wother" = 0 ] || fail "$wother requests got neither 200 nor 429"
ge "$wtotal" 10 && le "$wtotal" 12 || fail "the shared window admitted $wtotal, want 10..12 (10 a minute, plus what arrives within one sync)"
dep2="$(tok dep)"
ctl A usage report "$dep2" 1200 --bucket rpm >"$OUT/usage.txt" 2>&1 || fail "usage report on A: $(cat "$OUT/usage.txt")"
sleep 0.2
traffic window2 "$(seq_of b 6)" 0.05 "$(tok unused)" "/rpm/$dep2/v1/x"
read -r _ _ ub200 ub429 _ _ <<<"$(tally window2)"
note "1200 tokens reported on A (quota 1000), then 6 requests on B: $ub200 x200, $ub429 x429"
le "$ub200" 2 || fail "B admitted $ub200 of 6 for a deployment past its tokens on A, want at most 2 (before its sync)"
check_end "window: $wtotal of 10 admitted across both boxes; tokens reported on A refused B after $ub200"

# The cluster section is read once: a reload that changes it is refused
# whole, one that keeps it goes through.
check_begin cluster-reload
sed "s/sync_interval: ${INTERVAL_MS}ms/sync_interval: 50ms/" "$SLT_TMP/policy-a.yaml" >"$SLT_TMP/policy-changed.yaml"
if ctl A policy reload "$SLT_TMP/policy-changed.yaml" >"$OUT/reload-changed.txt" 2>&1; then
  fail "a reload changing the cluster section was accepted"
fi
grep -q "cluster section differs" "$OUT/reload-changed.txt" || fail "the refusal does not name the cluster section: $(cat "$OUT/reload-changed.txt")"
ctl A policy reload "$SLT_TMP/policy-a.yaml" >"$OUT/reload-same.txt" 2>&1 || fail "a reload keeping the cluster section was refused: $(cat "$OUT/reload-same.txt")"
check_end "changed cluster section refused ($(head -n 1 "$OUT/reload-changed.txt" | cut -c1-100)), same one reloaded"

# 3. The primary holding the key's slot is killed while both boxes use it;
# its replica takes over.
check_begin cluster-failover
t="$(tok failover)"
redis_lab_keys 'sluice:*:shared:*' | sort >"$OUT/keys-before.txt"
f0A="$(cstat A sync_failures)" f0B="$(cstat B sync_failures)"
traffic failover "$(seq_of ab 110)" 0.05 "$t" /shared/c3 &
tpid=$!
slt_track_pid "$tpid"
sleep 1.5
redis_lab_keys 'sluice:*:shared:*' | sort >"$OUT/keys-during.txt"
comm -13 "$OUT/keys-before.txt" "$OUT/keys-during.txt" >"$OUT/keys-new.txt"
owner="" key="" slot="" newowner="" failover_s=""
if [ "$(wc -l <"$OUT/keys-new.txt")" != 1 ]; then
  fail "want exactly one new shared key in Redis after 1.5 s of traffic, found $(wc -l <"$OUT/keys-new.txt"): $(head -c 300 "$OUT/keys-new.txt" | tr '\n' ' ')"
else
  read -r owner key <"$OUT/keys-new.txt"
  slot="$(redis_lab_cli "$owner" CLUSTER KEYSLOT "$key" | tr -d '\r')"
  tat1="$(redis_lab_cli "$owner" GET "$key" | tr -d '\r')"
  tk="$(now)"
  redis_lab_kill "$owner"
  note "the token's key $key: slot $slot on the primary at port $owner, TAT $tat1 us (Redis clock) just before the SIGKILL"
  for ((i = 0; i < 300; i++)); do
    newowner="$(redis_lab_slot_owner "$slot")"
    [ -n "$newowner" ] && [ "$newowner" != "$owner" ] && break
    newowner=""
    sleep 0.05
  done
  failover_s="$(since "$tk")"
  if [ -z "$newowner" ]; then
    fail "no live primary for slot $slot within 15 s of the kill"
  else
    redis_lab_wait_ok 15 >"$OUT/failover-wait.txt" || fail "$(cat "$OUT/failover-wait.txt")"
    tat2="$(redis_lab_cli "$newowner" GET "$key" | tr -d '\r')"
    lost_us=$(( ${tat1:-0} > ${tat2:-0} ? ${tat1:-0} - ${tat2:-0} : 0 ))
    note "port $newowner (its replica) serves slot $slot ${failover_s}s after the kill; the key's TAT there ${tat2:-none} us: $lost_us us of lead lost with the primary"
    # Replication is asynchronous: what the primary took in its last moments
    # may be lost, at most one sync's spends (one admission per box at this
    # pace: BOXES x 1 s of lead).
    [[ "$tat1" =~ ^[0-9]+$ ]] && [[ "$tat2" =~ ^[0-9]+$ ]] || fail "the key's TAT: '$tat1' on the old primary, '$tat2' on the new one"
    le "$lost_us" $((BOXES * 60000000 / RATE_PER_MIN)) || fail "the promoted replica's TAT is $lost_us us behind the old primary's, more than one sync's spends ($((BOXES * 60000000 / RATE_PER_MIN)) us)"
  fi
fi
wait "$tpid"
rm -f "$SLT_TMP/pids/$tpid"
read -r a200 a429 b200 b429 other T <<<"$(tally failover)"
total=$((a200 + b200))
base=$((BURST + $(refill "$T")))
lost=$BOXES   # one sync's spends, at most one admission per box (a request per box every 100 ms)
note "220 requests alternating A/B over ${T}s: A $a200 x200 $a429 x429, B $b200 x200 $b429 x429, other $other; admitted $total"
note "asserting $total <= burst + rate*T + overshoot bound + one sync's spends lost with the primary (asynchronous replication; one admission per box per sync at this pace) = $base + $OVERSHOOT + $lost = $((base + OVERSHOOT + lost))"
[ "$other" -eq 0 ] || fail "$other requests got neither 200 nor 429"
le "$total" $((base + OVERSHOOT + lost)) || fail "admitted $total > $((base + OVERSHOOT + lost))"
ge "$total" $((BURST - 2)) || fail "admitted $total < $((BURST - 2)): the burst itself was not admitted"
sA="$(wait_state A synced 10)" sB="$(wait_state B synced 10)"
f1A="$(cstat A sync_failures)" f1B="$(cstat B sync_failures)"
note "sync_failures A $f0A -> $f1A, B $f0B -> $f1B; state synced when the traffic ended (waited A ${sA}s, then B ${sB}s); fallbacks A $(cstat A fallbacks), B $(cstat B fallbacks)"
[ "$sA" != never ] && [ "$sB" != never ] || fail "state after the failover: A $(cstat A state), B $(cstat B state) (last_error A '$(cstat A last_error)', B '$(cstat B last_error)'), want synced"
ge "$((f1A - f0A))" 1 && ge "$((f1B - f0B))" 1 || fail "sync_failures did not grow on both boxes: A $f0A -> $f1A, B $f0B -> $f1B"
check_end "failover in ${failover_s:-?}s, admitted $total <= $((base + OVERSHOOT + lost)), sync_failures A +$((f1A - f0A)), B +$((f1B - f0B)), both synced"

# 4. No Redis at all: each box enforces its share (local-share, boxes 2).
check_begin cluster-redis-down
w0A="$(log_count A 'cluster sync failed')" w0B="$(log_count B 'cluster sync failed')"
fb0A="$(cstat A fallbacks)" fb0B="$(cstat B fallbacks)"
redis_lab_kill_all
note "SIGKILL to every Redis node; alive now: '$(redis_lab_alive)'"
# 150 ms between two requests on a box: the fallback charges a spend after
# its second failed sync (20-60 ms), before the box's next request.
traffic down "$(seq_of ab 15)" 0.075 "$(tok down)" /shared/c4
read -r a200 a429 b200 b429 other T <<<"$(tally down)"
half=$((BURST / BOXES))
note "15 requests per box, alternating, over ${T}s: A $a200 x200 $a429 x429, B $b200 x200 $b429 x429; each box's share burst/boxes = $half, asserting 1..$((half + 2)) each"
[ "$other" -eq 0 ] || fail "$other requests got neither 200 nor 429"
ge "$a200" 1 && le "$a200" $((half + 2)) || fail "A admitted $a200, want 1..$((half + 2))"
ge "$b200" 1 && le "$b200" $((half + 2)) || fail "B admitted $b200, want 1..$((half + 2))"
for b in A B; do
  s="$(cstats "$b")"
  note "box $b: $s"
  [ "$(kv state "$s")" = fallback ] || fail "box $b state '$(kv state "$s")', want fallback"
  ge "$(kv fallbacks "$s")" 1 || fail "box $b fallbacks '$(kv fallbacks "$s")', want >= 1"
  ge "$(kv fallback_keys "$s")" 1 || fail "box $b fallback_keys '$(kv fallback_keys "$s")', want >= 1"
done
fb1A="$(cstat A fallbacks)" fb1B="$(cstat B fallbacks)"
w1A="$(log_count A 'cluster sync failed')" w1B="$(log_count B 'cluster sync failed')"
note "warnings 'cluster sync failed' in the logs: A $w0A -> $w1A, B $w0B -> $w1B; fallbacks A $fb0A -> $fb1A, B $fb0B -> $fb1B"
[ $((w1A - w0A)) = 1 ] && [ $((w1B - w0B)) = 1 ] || fail "want the warning once per box for this outage: A +$((w1A - w0A)), B +$((w1B - w0B))"
grep -h 'cluster sync failed' "${SLUICED_LOG[A]}" | tail -n 1 | sed 's/^/  # A: /'
check_end "A $a200, B $b200 of 15 each (share $half), both in fallback, warned once each"

# 5. Redis back (a fresh, empty cluster on the same ports): both boxes say
# synced again, and once every link's back-off (at most 5 s) has run out a
# fresh token's budget is one again, with no fallback on the way.
check_begin cluster-redis-back
r0A="$(log_count A 'cluster sync works again')" r0B="$(log_count B 'cluster sync works again')"
# A timeline of both boxes' cluster stats, every 0.2 s or so, for the log (artifacts).
( while :; do
    printf '%s A %s | B %s\n' "$EPOCHREALTIME" "$(cstats A)" "$(cstats B)"
    sleep 0.2
  done ) >"$OUT/redis-back-timeline.txt" 2>/dev/null &
poller=$!
slt_track_pid "$poller"   # stopped by teardown too, if this run ends early
t0="$(now)"
if ! redis_lab_start >"$OUT/redis-restart.txt" 2>&1 || ! redis_lab_create 1 >>"$OUT/redis-restart.txt" 2>&1; then
  fail "the Redis Cluster did not come back: $(tr '\n' ' ' <"$OUT/redis-restart.txt")"
fi
tok_s="$(since "$t0")"
tok_at="$(now)"
limit=6.7   # the back-off's maximum (5 s) + ten intervals + 1.5 s for a busy machine
doneA="" doneB=""
while :; do
  [ -z "$doneA" ] && [ "$(cstat A state)" = synced ] && doneA="$(since "$tok_at")"
  [ -z "$doneB" ] && [ "$(cstat B state)" = synced ] && doneB="$(since "$tok_at")"
  [ -n "$doneA" ] && [ -n "$doneB" ] && break
  awk -v a="$tok_at" -v b="$EPOCHREALTIME" 'BEGIN { exit !(b - a > 15) }' && break
  sleep 0.05
done
note "Redis Cluster ok again ${tok_s}s after the restart began; synced again after cluster ok: A ${doneA:-never}s, B ${doneB:-never}s (limit ${limit}s)"
for b in A B; do
  d="$([ "$b" = A ] && echo "$doneA" || echo "$doneB")"
  if [ -z "$d" ]; then fail "box $b not synced within 15 s of the cluster being ok: $(cstats "$b")"
  elif awk -v d="$d" -v l="$limit" 'BEGIN { exit !(d > l) }'; then fail "box $b synced ${d}s after the cluster was ok, want <= ${limit}s"
  fi
done
wsA="$(log_count A 'cluster sync failed')" wsB="$(log_count B 'cluster sync failed')"
note "'cluster sync failed' over the whole outage, until synced again: A +$((wsA - w0A)), B +$((wsB - w0B))"
[ $((wsA - w0A)) = 1 ] && [ $((wsB - w0B)) = 1 ] || fail "want 'cluster sync failed' once per box over the outage: A +$((wsA - w0A)), B +$((wsB - w0B))"
# Every node's link has tried again by the back-off's maximum.
sA="$(cstats A)" sB="$(cstats B)"
awk -v a="$tok_at" -v b="$EPOCHREALTIME" 'BEGIN { d = 5.2 - (b - a); if (d > 0) system("sleep " d) }'
s1A="$(cstats A)" s1B="$(cstats B)"
note "between synced and cluster ok + 5.2 s: fallbacks A $(kv fallbacks "$sA") -> $(kv fallbacks "$s1A"), B $(kv fallbacks "$sB") -> $(kv fallbacks "$s1B"); sync_failures A $(kv sync_failures "$sA") -> $(kv sync_failures "$s1A"), B $(kv sync_failures "$sB") -> $(kv sync_failures "$s1B")"
traffic back "$(seq_of ab 20)" 0.05 "$(tok back)" /shared/c5
read -r a200 a429 b200 b429 other T <<<"$(tally back)"
total=$((a200 + b200))
base=$((BURST + $(refill "$T")))
note "fresh token, 40 requests alternating over ${T}s: A $a200 x200 $a429 x429, B $b200 x200 $b429 x429; admitted $total; one budget: $base; two (unshared): $((2 * base))"
[ "$other" -eq 0 ] || fail "$other requests got neither 200 nor 429"
ge "$total" $((base - 2)) || fail "admitted $total < $((base - 2))"
le "$total" $((base + PACED)) || fail "admitted $total, want <= burst + rate*T + $PACED = $((base + PACED)) (shared again, not a budget per box)"
# Shared, not local-share (which also admits about one burst in all): a
# fresh token's whole burst on A alone, then nothing on B.
t="$(tok back-a)"
traffic backA "$(seq_of a 21)" 0.01 "$t" /shared/c5a
sleep 0.2
traffic backB "$(seq_of b 10)" 0.01 "$t" /shared/c5a
read -r xa200 xa429 _ _ xother _ <<<"$(tally backA)"
read -r _ _ xb200 xb429 yother _ <<<"$(tally backB)"
note "fresh token on A alone: $xa200 x200 $xa429 x429 (local-share would stop near $((BURST / BOXES))); then on B: $xb200 x200 $xb429 x429"
[ "$xother" -eq 0 ] && [ "$yother" -eq 0 ] || fail "$((xother + yother)) requests got neither 200 nor 429"
[ "$xa200" = "$BURST" ] || fail "A alone admitted $xa200 of a fresh token's 21, want the whole burst $BURST"
le "$xb200" 5 || fail "B then admitted $xb200, want <= 5"
s2A="$(cstats A)" s2B="$(cstats B)"
kill "$poller" 2>/dev/null
wait "$poller" 2>/dev/null
rm -f "$SLT_TMP/pids/$poller"
for b in A B; do
  x="$([ "$b" = A ] && echo "$s1A" || echo "$s1B")" y="$([ "$b" = A ] && echo "$s2A" || echo "$s2B")"
  note "box $b during the traffic: fallbacks $(kv fallbacks "$x") -> $(kv fallbacks "$y"), sync_failures $(kv sync_failures "$x") -> $(kv sync_failures "$y"), state $(kv state "$y")"
  [ "$(kv fallbacks "$x")" = "$(kv fallbacks "$y")" ] && [ "$(kv sync_failures "$x")" = "$(kv sync_failures "$y")" ] ||
    fail "box $b fell back during the traffic, 5.2 s after the cluster was ok: fallbacks $(kv fallbacks "$x") -> $(kv fallbacks "$y"), sync_failures $(kv sync_failures "$x") -> $(kv sync_failures "$y"), last_error '$(kv last_error "$y")'"
  [ "$(kv state "$y")" = synced ] || fail "box $b state '$(kv state "$y")' after the traffic, want synced"
done
r1A="$(log_count A 'cluster sync works again')" r1B="$(log_count B 'cluster sync works again')"
w2A="$(log_count A 'cluster sync failed')" w2B="$(log_count B 'cluster sync failed')"
note "since Redis went down: 'cluster sync works again' A +$((r1A - r0A)), B +$((r1B - r0B)); 'cluster sync failed' A +$((w2A - w0A)), B +$((w2B - w0B))"
ge $((r1A - r0A)) 1 && ge $((r1B - r0B)) 1 || fail "want 'cluster sync works again' on each box"
check_end "synced again after A ${doneA:-never}s, B ${doneB:-never}s; fresh tokens: $total alternating (one budget $base), $xa200 on A alone then $xb200 on B"

# 5b. A partition: box A alone cut from Redis (its management link down)
# for CUT seconds while both keep spending one token, then back. Cut, A
# holds its local share and B, not seeing A, the whole budget: the excess
# grows to at most (burst + rate*CUT)/boxes. What A admitted meanwhile is
# kept and sent once Redis answers it again, so both boxes repay it: over
# the cut and the repayment the two admit one budget, burst + rate*W.
check_begin cluster-partition
CUT=12
t="$(tok partition)"
rp0="$(cstat A repaid_keys)"
traffic partition "$(seq_of ab 180)" 0.1 "$t" /shared/p1 &
tpid=$!
sleep 1
ip -n "$NS_A" link set m0 down
cut_at="$(now)"
sleep "$CUT"
note "box A during the cut: $(cstats A)"
ip -n "$NS_A" link set m0 up
cut_len="$(since "$cut_at")"
wait "$tpid"
read -r a200 a429 b200 b429 other W <<<"$(tally partition)"
total=$((a200 + b200))
budget=$((BURST + $(refill "$W")))
cut_end="$(awk -v c="$cut_len" 'BEGIN { printf "%.3f", 1 + c }')"
during="$(awk -v e="$cut_end" '!/^#/ && NF == 4 && $3 == 200 && $4 <= e { n++ } END { print n + 0 }' "$OUT/partition.txt")"
within_cut=$((BURST + $(refill "$cut_end")))
excess_bound="$(awk -v b=$BURST -v r=$RATE_PER_MIN -v c="$cut_len" -v n=$BOXES 'BEGIN { printf "%d", (b + r / 60 * c) / n + 1 }')"
note "cut ${cut_len}s of ${W}s: A $a200 x200 $a429 x429, B $b200 x200 $b429 x429; admitted $total against one budget $budget over the whole; $during by the cut's end against $within_cut (excess bound (b + r*T)/N = $excess_bound, + sync bound $OVERSHOOT)"
[ "$other" -eq 0 ] || fail "$other requests got neither 200 nor 429"
le "$during" $((within_cut + excess_bound + OVERSHOOT)) ||
  fail "by the cut's end $during admitted, want <= $within_cut + $excess_bound + $OVERSHOOT"
le "$total" $((budget + PACED)) || fail "admitted $total over ${W}s, want <= one budget $budget + $PACED: the cut box's spending was not repaid"
ge "$total" $((budget - excess_bound - PACED)) || fail "admitted $total over ${W}s, want >= $((budget - excess_bound - PACED))"
rp1="$(cstat A repaid_keys)"
ge $((rp1 - rp0)) 1 || fail "box A repaid_keys $rp0 -> $rp1, want its spends in fallback sent"
[ "$(cstat A state)" = synced ] || fail "box A not synced again: $(cstats A)"
check_end "cut ${cut_len}s: $during admitted by its end (budget $within_cut, excess <= $excess_bound); $total over ${W}s against one budget $budget: repaid (A repaid_keys +$((rp1 - rp0)))"

# 6. The metrics.
check_begin cluster-metrics
for b in A B; do
  ns="$([ "$b" = A ] && echo "$NS_A" || echo "$NS_B")"
  in_ns "$ns" curl --noproxy '*' -sS --max-time 5 http://127.0.0.1:9464/metrics >"$OUT/metrics-$b.txt" 2>&1
  okn="$(awk '$1 == "sluice_cluster_syncs_total{outcome=\"ok\"}" { print $2 }' "$OUT/metrics-$b.txt")"
  fln="$(awk '$1 == "sluice_cluster_syncs_total{outcome=\"failed\"}" { print $2 }' "$OUT/metrics-$b.txt")"
  fbn="$(awk '$1 == "sluice_cluster_fallbacks_total" { print $2 }' "$OUT/metrics-$b.txt")"
  note "box $b: sluice_cluster_syncs_total ok $okn failed $fln, sluice_cluster_fallbacks_total $fbn ($(grep -c '^sluice_cluster_' "$OUT/metrics-$b.txt") sluice_cluster_* samples)"
  ge "$okn" 1 || fail "box $b: sluice_cluster_syncs_total{outcome=\"ok\"} '$okn', want > 0"
  ge "$fbn" 1 || fail "box $b: sluice_cluster_fallbacks_total '$fbn', want >= 1"
  rtn="$(awk '$1 == "sluice_cluster_round_trips_total" { print $2 }' "$OUT/metrics-$b.txt")"
  lrn="$(awk '$1 == "sluice_cluster_keys_total{op=\"learned\"}" { print $2 }' "$OUT/metrics-$b.txt")"
  note "box $b: sluice_cluster_round_trips_total $rtn, keys learned from the other box's change logs $lrn"
  ge "$rtn" 1 || fail "box $b: sluice_cluster_round_trips_total '$rtn', want > 0"
  ge "$lrn" 1 || fail "box $b: sluice_cluster_keys_total{op=\"learned\"} '$lrn', want >= 1 (both boxes spent on shared keys)"
  apn="$(awk '$1 == "sluice_cluster_replicated_changes_total{op=\"applied\"}" { print $2 }' "$OUT/metrics-$b.txt")"
  note "box $b: changes of the other box applied: $apn"
  ge "$apn" 1 || fail "box $b: sluice_cluster_replicated_changes_total{op=\"applied\"} '$apn', want >= 1 (the other box's run or credential)"
  st="$(timeout -k 1 10 "$SLUICECTL" --socket "${SOCK[$b]}" status 2>&1 | grep '^cluster ')"
  note "box $b: status says: $st"
  grep -qE "^cluster +synced as [^ ]+/[0-9a-f]{8}, Redis $REDIS_HOST:" <<<"$st" || fail "box $b: sluicectl status has no cluster line naming its box and Redis: '$st'"
done
check_end "both boxes export sluice_cluster_syncs_total{outcome=\"ok\"} > 0 and sluice_cluster_fallbacks_total >= 1; status names the cluster"

# 7. Both stop cleanly on SIGTERM, Redis answering.
check_begin cluster-appliance-exit
for b in A B; do
  box_stop "$b"
  [ "$BOX_STATUS" = 0 ] || fail "sluiced $b: exit '$BOX_STATUS' after SIGTERM, want 0: $(tail -n 5 "${SLUICED_LOG[$b]}" | tr '\n' '|')"
done
check_end "both exited 0"

# Everything of this run gone.
started="${STARTED[*]} ${RL_STARTED[*]}"
teardown
check_begin cluster-teardown
left_ns="$(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$P-" | tr '\n' ' ')"
[ -z "$left_ns" ] || fail "namespaces left: $left_ns"
[ ! -e "$SLT_TMP" ] || fail "temp dir left: $SLT_TMP"
alive=""
for p in $started; do kill -0 "$p" 2>/dev/null && alive+=" $p($(tr '\0' ' ' </proc/"$p"/cmdline 2>/dev/null | head -c 60))"; done
[ -z "$alive" ] || fail "processes of this run still alive:$alive"
check_end "no namespace $P-*, no temp dir, none of the $(wc -w <<<"$started") processes it started alive"

passed=0 failed=0
for c in "${ORDER[@]}"; do
  if [ "${RESULT[$c]}" = PASS ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
done
echo "cluster: $passed passed, $failed failed ($((SECONDS - T_START))s)${failed:+}"
[ "$failed" -eq 0 ]
