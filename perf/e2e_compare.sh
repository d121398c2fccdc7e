#!/usr/bin/env bash
# End to end, side by side in one run: wrk (Debian) drives the same origin
# (nginx) through
#   1. sluiced inline (AF_PACKET driver, one worker), and
#   2. nginx acting as a rate-limiting reverse proxy (limit_req, keep-alive
#      upstream) in the same middle namespace, the kernel bridging the rest,
# with the same per-address budget, set high enough that every request is
# admitted (the limiter decides on every request; nothing is refused, so both
# forward the same work). Prints requests per second (wrk) and the CPU
# seconds the limiter itself used per 100k requests (utime + stime from
# /proc), each the median of --runs runs, alternating the two.
#
#   perf/e2e_compare.sh [BUILD_DIR] [--runs N] [--seconds S] [--connections C]
#
# Traffic stays inside three namespaces this script creates (198.18.0.0/24);
# everything is torn down on exit, also on failure or interruption.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"

build=build runs=3 seconds=8 connections=32
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs="$2"; shift 2 ;;
    --seconds) seconds="$2"; shift 2 ;;
    --connections) connections="$2"; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
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

cat >"$SLT_TMP/bench.yaml" <<'EOF'
sluice: 1
name: bench
service_ports: [80]
buckets:
  per-ip: { rate: 6000000/min, burst: 100000 }
rules:
  - name: per-ip
    key: client_ip
    bucket: per-ip
EOF
mkdir -p "$SLT_TMP/proxy"
cat >"$SLT_TMP/proxy/nginx.conf" <<EOF
# The same budget as bench.yaml: 100000 a second per address, bursts of 100000.
worker_processes 1;
daemon off;
pid $SLT_TMP/proxy/nginx.pid;
error_log $SLT_TMP/proxy/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $SLT_TMP/proxy;
  proxy_temp_path $SLT_TMP/proxy;
  fastcgi_temp_path $SLT_TMP/proxy;
  uwsgi_temp_path $SLT_TMP/proxy;
  scgi_temp_path $SLT_TMP/proxy;
  limit_req_zone \$binary_remote_addr zone=perip:10m rate=100000r/s;
  upstream origin { server $ORIGIN4:80; keepalive 64; }
  server {
    listen $PROXY4:80;
    keepalive_requests 1000000;
    location / {
      limit_req zone=perip burst=100000 nodelay;
      limit_req_status 429;
      proxy_pass http://origin;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }
  }
}
EOF

cpu_ticks() {  # utime + stime of the given pids, in clock ticks
  local t=0 p
  for p in "$@"; do
    [ -r "/proc/$p/stat" ] || continue
    t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat")))
  done
  echo "$t"
}

# One wrk run against URL while measuring PIDS' CPU: prints "rps cpu_s_per_100k".
measure() {
  local url="$1"; shift
  local before after out rps reqs
  before="$(cpu_ticks "$@")"
  out="$(in_cli wrk -t1 -c"$connections" -d"${seconds}s" --latency "$url" 2>&1)" || { echo "$out" >&2; return 1; }
  after="$(cpu_ticks "$@")"
  rps="$(awk '/^Requests\/sec/ {print $2}' <<<"$out")"
  reqs="$(awk '/requests in/ {print $1}' <<<"$out")"
  if grep -q 'Non-2xx' <<<"$out"; then echo "warning: wrk saw non-2xx responses: $(grep Non-2xx <<<"$out")" >&2; fi
  awk -v r="$rps" -v n="$reqs" -v t=$((after - before)) -v hz="$(getconf CLK_TCK)" \
    'BEGIN { printf "%.0f %.3f\n", r, (t / hz) / (n / 100000) }'
}

median() { sort -n | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

echo "== topology, origin (nginx)"
topology_up
origin_start
sluiced_rows=() proxy_rows=()
for ((r = 1; r <= runs; r++)); do
  echo "== run $r/$runs: sluiced inline"
  appliance_start "$SLT_TMP/bench.yaml" 1 || exit 1
  sluiced_rows+=("$(measure "http://$ORIGIN4/" "$SLT_APPLIANCE_PID")")
  echo "   ${sluiced_rows[-1]}"
  appliance_stop || true

  echo "== run $r/$runs: nginx limit_req proxy"
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
  ip netns exec "$NS_BOX" nginx -c "$SLT_TMP/proxy/nginx.conf" -e "$SLT_TMP/proxy/error.log" &
  PROXY_PID=$!
  ready=0
  for ((i = 0; i < 50; i++)); do
    if in_cli curl -sf -o /dev/null --connect-timeout 0.2 --max-time 1 "http://$PROXY4/healthz"; then ready=1; break; fi
    sleep 0.1
  done
  [ "$ready" = 1 ] || { echo "the nginx proxy did not answer on $PROXY4:" >&2; tail -5 "$SLT_TMP/proxy/error.log" >&2; exit 1; }
  proxy_pids="$(ip netns pids "$NS_BOX")"
  # shellcheck disable=SC2086
  proxy_rows+=("$(measure "http://$PROXY4/" $proxy_pids)")
  echo "   ${proxy_rows[-1]}"
  kill "$PROXY_PID" 2>/dev/null; wait "$PROXY_PID" 2>/dev/null || true
  PROXY_PID=""
  # Nothing of the proxy may outlive its run (the next one binds the same port).
  ip netns pids "$NS_BOX" | xargs -r kill -KILL 2>/dev/null || true
  ip -n "$NS_BOX" link del br0
done

s_rps="$(printf '%s\n' "${sluiced_rows[@]}" | awk '{print $1}' | median)"
s_cpu="$(printf '%s\n' "${sluiced_rows[@]}" | awk '{print $2}' | median)"
p_rps="$(printf '%s\n' "${proxy_rows[@]}" | awk '{print $1}' | median)"
p_cpu="$(printf '%s\n' "${proxy_rows[@]}" | awk '{print $2}' | median)"
echo
echo "wrk -t1 -c$connections -d${seconds}s, GET / (3-byte body), medians of $runs runs on $(nproc) CPUs"
printf '%-34s %12s %26s\n' "limiter" "requests/s" "limiter CPU s per 100k req"
printf '%-34s %12s %26s\n' "sluiced (AF_PACKET, 1 worker)" "$s_rps" "$s_cpu"
printf '%-34s %12s %26s\n' "nginx limit_req proxy (1 worker)" "$p_rps" "$p_cpu"
echo "(sluiced busy-polls while traffic flows: its CPU time is wall time of one core, whatever the load)"
