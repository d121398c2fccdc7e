#!/usr/bin/env bash
# End to end, side by side in one run: wrk (Debian) drives the same origin
# (nginx) through
#   1. sluiced inline on DPDK's AF_PACKET driver (one worker),
#   2. sluiced inline on DPDK's AF_XDP driver (one worker; where the kernel
#      has AF_XDP sockets, unless --attach af-packet), and
#   3. nginx acting as a rate-limiting reverse proxy (limit_req, keep-alive
#      upstream) in the same middle namespace, the kernel bridging the rest,
# with the same per-address budget, in two scenarios:
#   admitting  a budget high enough that every request is admitted (the
#              limiter decides on every request and forwards it);
#   refusing   a budget of one request a minute, spent at once: every other
#              request is answered 429 by the limiter itself, on the same
#              keep-alive connection (the origin sees almost nothing).
# Prints requests per second (wrk, every answer counted) and the CPU seconds
# the limiter itself used per 100k requests (utime + stime from /proc), each
# the median of --runs runs, alternating the limiters.
#
#   perf/e2e_compare.sh [BUILD_DIR] [--runs N] [--seconds S] [--connections C]
#                       [--scenario admitting|refusing|both] [--attach af-packet|af-xdp|both]
#
# Traffic stays inside three namespaces this script creates (198.18.0.0/24);
# everything is torn down on exit, also on failure or interruption.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"

build=build runs=3 seconds=8 connections=32 scenarios="admitting refusing" attach=auto
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs="$2"; shift 2 ;;
    --seconds) seconds="$2"; shift 2 ;;
    --connections) connections="$2"; shift 2 ;;
    --scenario)
      case "$2" in
        admitting|refusing) scenarios="$2" ;;
        both) scenarios="admitting refusing" ;;
        *) echo "e2e_compare.sh: --scenario must be admitting, refusing or both" >&2; exit 2 ;;
      esac
      shift 2 ;;
    --attach)
      case "$2" in
        af-packet|af-xdp|both) attach="$2" ;;
        *) echo "e2e_compare.sh: --attach must be af-packet, af-xdp or both" >&2; exit 2 ;;
      esac
      shift 2 ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    -*) echo "e2e_compare.sh: unknown option $1" >&2; exit 2 ;;
    *) build="$1"; shift ;;
  esac
done
[ "$(id -u)" -eq 0 ] || { echo "e2e_compare.sh: needs root (network namespaces)" >&2; exit 3; }
[ -x "$build/src/sluiced" ] || { echo "e2e_compare.sh: $build/src/sluiced not built" >&2; exit 3; }
for tool in wrk nginx; do
  command -v "$tool" >/dev/null || { echo "e2e_compare.sh: $tool missing (scripts/install-deps.sh test)" >&2; exit 3; }
done

# shellcheck source=../tests/integration/topology.sh
. tests/integration/topology.sh
# shellcheck source=../tests/integration/origin.sh
. tests/integration/origin.sh
SLUICE_APPLIANCE=sluiced
SLUICED="$root/$build/src/sluiced"
PROXY4=198.18.0.30

attach="$(slt_attach_modes e2e_compare.sh "$attach")" || exit 3

slt_clean_stale
slt_init "slt-$$"
PROXY_PID=""
cleanup() {
  [ -n "$PROXY_PID" ] && kill "$PROXY_PID" 2>/dev/null
  [ -n "${NS_BOX:-}" ] && ip netns pids "$NS_BOX" 2>/dev/null | xargs -r kill -KILL 2>/dev/null
  topology_down
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Each scenario's budget, the same for both limiters: the policy's rate and
# burst, and nginx's (limit_req's burst counts past the first request).
write_policy() {  # NAME RATE BURST
  cat >"$SLT_TMP/$1.yaml" <<EOF
sluice: 1
name: $1
service_ports: [80]
buckets:
  per-ip: { rate: $2, burst: $3 }
rules:
  - name: per-ip
    key: client_ip
    bucket: per-ip
EOF
}
write_proxy_conf() {  # NAME RATE BURST (0: none)
  local burst=""
  [ "$3" != 0 ] && burst="burst=$3 "
  mkdir -p "$SLT_TMP/proxy-$1"
  cat >"$SLT_TMP/proxy-$1/nginx.conf" <<EOF
worker_processes 1;
daemon off;
pid $SLT_TMP/proxy-$1/nginx.pid;
error_log $SLT_TMP/proxy-$1/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $SLT_TMP/proxy-$1;
  proxy_temp_path $SLT_TMP/proxy-$1;
  fastcgi_temp_path $SLT_TMP/proxy-$1;
  uwsgi_temp_path $SLT_TMP/proxy-$1;
  scgi_temp_path $SLT_TMP/proxy-$1;
  limit_req_zone \$binary_remote_addr zone=perip:10m rate=$2;
  upstream origin { server $ORIGIN4:80; keepalive 64; }
  server {
    listen $PROXY4:80;
    keepalive_requests 1000000;
    location / {
      limit_req zone=perip ${burst}nodelay;
      limit_req_status 429;
      proxy_pass http://origin;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }
  }
}
EOF
}
# admitting: 100000 a second per address, bursts of 100000.
write_policy admitting 6000000/min 100000
write_proxy_conf admitting 100000r/s 100000
# refusing: one a minute.
write_policy refusing 1/min 1
write_proxy_conf refusing 1r/m 0

cpu_ticks() {  # utime + stime of the given pids, in clock ticks
  local t=0 p
  for p in "$@"; do
    [ -r "/proc/$p/stat" ] || continue
    t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat")))
  done
  echo "$t"
}

# One wrk run against URL while measuring PIDS' CPU: prints "rps
# cpu_s_per_100k refused_percent" (refused: wrk's non-2xx answers).
measure() {
  local url="$1"; shift
  local before after out rps reqs refused
  before="$(cpu_ticks "$@")"
  out="$(in_cli wrk -t1 -c"$connections" -d"${seconds}s" --latency "$url" 2>&1)" || { echo "$out" >&2; return 1; }
  after="$(cpu_ticks "$@")"
  rps="$(awk '/^Requests\/sec/ {print $2}' <<<"$out")"
  reqs="$(awk '/requests in/ {print $1}' <<<"$out")"
  refused="$(awk '/Non-2xx or 3xx responses/ {print $5}' <<<"$out")"
  awk -v r="$rps" -v n="$reqs" -v x="${refused:-0}" -v t=$((after - before)) -v hz="$(getconf CLK_TCK)" \
    'BEGIN { printf "%.0f %.3f %.1f\n", r, (t / hz) / (n / 100000), 100 * x / n }'
}

median() { sort -n | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

proxy_up() {  # SCENARIO: the nginx proxy in the middle namespace, answering
  # Nothing of an AF_XDP sluiced may sit in front of the bridge.
  ip -n "$NS_BOX" link set dev c1 xdp off 2>/dev/null || true
  ip -n "$NS_BOX" link set dev o1 xdp off 2>/dev/null || true
  ip -n "$NS_BOX" link add br0 type bridge stp_state 0 forward_delay 0
  ip -n "$NS_BOX" link set c1 master br0
  ip -n "$NS_BOX" link set o1 master br0
  ip -n "$NS_BOX" addr add "$PROXY4/24" dev br0
  ip -n "$NS_BOX" link set br0 up
  # The topology keeps the appliance's namespace silent (arp_ignore); the
  # proxy has an address there and must answer ARP for it.
  in_box sysctl -qw net.ipv4.conf.all.arp_ignore=0 net.ipv4.conf.br0.arp_ignore=0
  # Not through in_box (a function: `&` would fork a shell around it): this
  # way $! is nginx's master itself, which stops on SIGTERM.
  ip netns exec "$NS_BOX" nginx -c "$SLT_TMP/proxy-$1/nginx.conf" -e "$SLT_TMP/proxy-$1/error.log" &
  PROXY_PID=$!
  local ready=0 i
  for ((i = 0; i < 50; i++)); do
    # Any answer will do: the refusing proxy may answer its probe 429.
    if in_cli curl -s -o /dev/null --connect-timeout 0.2 --max-time 1 "http://$PROXY4/healthz"; then ready=1; break; fi
    sleep 0.1
  done
  [ "$ready" = 1 ] || { echo "the nginx proxy did not answer on $PROXY4:" >&2; tail -5 "$SLT_TMP/proxy-$1/error.log" >&2; exit 1; }
}
proxy_down() {
  kill "$PROXY_PID" 2>/dev/null; wait "$PROXY_PID" 2>/dev/null || true
  PROXY_PID=""
  # Nothing of the proxy may outlive its run (the next one binds the same port).
  ip netns pids "$NS_BOX" | xargs -r kill -KILL 2>/dev/null || true
  ip -n "$NS_BOX" link del br0
}

echo "== topology, origin (nginx)"
topology_up
origin_start
declare -A rows=()
for scenario in $scenarios; do
  for ((r = 1; r <= runs; r++)); do
    for a in $attach; do
      echo "== $scenario, run $r/$runs: sluiced inline ($a)"
      # Each run from full buckets: not the last run's, kept in its snapshot.
      rm -f "$SLT_TMP/state/buckets.snapshot"
      args=""
      [ "$a" = af-xdp ] && args="--af-xdp c1:o1"
      appliance_start "$SLT_TMP/$scenario.yaml" 1 "$args" || exit 1
      row="$(measure "http://$ORIGIN4/" "$SLT_APPLIANCE_PID")"
      rows[$scenario,$a]+="$row"$'\n'
      echo "   $row"
      appliance_stop || true
    done

    echo "== $scenario, run $r/$runs: nginx limit_req proxy"
    proxy_up "$scenario"
    proxy_pids="$(ip netns pids "$NS_BOX")"
    # shellcheck disable=SC2086
    row="$(measure "http://$PROXY4/" $proxy_pids)"
    rows[$scenario,proxy]+="$row"$'\n'
    echo "   $row"
    proxy_down
  done
done

column_median() { awk -v c="$1" 'NF { print $c }' | median; }
echo
echo "wrk -t1 -c$connections -d${seconds}s, GET / (3-byte body), medians of $runs runs on $(nproc) CPUs"
printf '%-10s %-34s %12s %26s %10s\n' "scenario" "limiter" "requests/s" "limiter CPU s per 100k req" "refused %"
for scenario in $scenarios; do
  for limiter in $attach proxy; do
    case "$limiter" in
      af-packet) name="sluiced (AF_PACKET, 1 worker)" ;;
      af-xdp) name="sluiced (AF_XDP, 1 worker)" ;;
      proxy) name="nginx limit_req proxy (1 worker)" ;;
    esac
    data="${rows[$scenario,$limiter]}"
    printf '%-10s %-34s %12s %26s %10s\n' "$scenario" "$name" "$(column_median 1 <<<"$data")" \
      "$(column_median 2 <<<"$data")" "$(column_median 3 <<<"$data")"
  done
done
echo "(sluiced busy-polls while traffic flows: its CPU time is wall time of one core, whatever the load)"
