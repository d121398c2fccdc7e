#!/usr/bin/env bash
# The latency sluiced adds, against a Linux bridge in the same place, side by
# side in one run: sequential GETs from the client namespace to the origin
# (nginx), one at a time (perf/latency_client.py), through
#   1. a Linux bridge joining the two veth ends in the middle namespace,
#   2. sluiced inline on DPDK's AF_PACKET driver (one worker, a budget that
#      admits everything), and
#   3. sluiced on AF_XDP (where the kernel has AF_XDP sockets, unless
#      --attach af-packet),
# alternated run by run, each measured two ways:
#   keep-alive      one connection, each request timed from its first byte
#                   sent to the last byte of its answer;
#   new connection  a connection per request (Connection: close), timed from
#                   the connect: sluiced's SYN proxy and its delayed binding
#                   to the origin are in it.
# Prints, per way and path, the medians over --runs of each run's p50 and
# p99 (microseconds) and what sluiced adds to the bridge's.
#
#   perf/latency.sh [BUILD_DIR] [--runs N] [--requests N] [--attach af-packet|af-xdp|both]
#                   [--idle-sleep US]
#
# --idle-sleep is passed to sluiced (its default on kernel interfaces is
# 20: an idle worker sleeps that long between empty polls).
# Traffic stays inside three namespaces this script creates (198.18.0.0/24);
# everything is torn down on exit, also on failure or interruption.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"

build=build runs=3 requests=2000 attach=auto idle=""
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs="$2"; shift 2 ;;
    --requests) requests="$2"; shift 2 ;;
    --idle-sleep) idle="$2"; shift 2 ;;
    --attach)
      case "$2" in
        af-packet|af-xdp|both) attach="$2" ;;
        *) echo "latency.sh: --attach must be af-packet, af-xdp or both" >&2; exit 2 ;;
      esac
      shift 2 ;;
    -h|--help) sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "latency.sh: unknown option $1" >&2; exit 2 ;;
    *) build="$1"; shift ;;
  esac
done
case "$runs$requests" in *[!0-9]*) echo "latency.sh: --runs and --requests take whole numbers" >&2; exit 2 ;; esac
[ "$runs" -ge 1 ] && [ "$requests" -ge 1 ] || { echo "latency.sh: --runs and --requests must be positive" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || { echo "latency.sh: needs root (network namespaces)" >&2; exit 3; }
[ -x "$build/src/sluiced" ] || { echo "latency.sh: $build/src/sluiced not built" >&2; exit 3; }
command -v nginx >/dev/null || { echo "latency.sh: nginx missing (scripts/install-deps.sh test)" >&2; exit 3; }

# shellcheck source=../tests/integration/topology.sh
. tests/integration/topology.sh
# shellcheck source=../tests/integration/origin.sh
. tests/integration/origin.sh
SLUICED="$root/$build/src/sluiced"

attach="$(slt_attach_modes latency.sh "$attach")" || exit 3

slt_clean_stale
slt_init "slt-$$"
cleanup() {
  [ -n "${NS_BOX:-}" ] && ip netns pids "$NS_BOX" 2>/dev/null | xargs -r kill -KILL 2>/dev/null
  topology_down
}
trap cleanup EXIT
trap 'exit 130' INT TERM

cat >"$SLT_TMP/permissive.yaml" <<EOF
sluice: 1
name: latency
service_ports: [80]
buckets:
  per-ip: { rate: 6000000/min, burst: 100000 }
rules:
  - name: per-ip
    key: client_ip
    bucket: per-ip
EOF

# One way through the path now up: "p50 p90 p99 max".
measure() {  # keep-alive|new
  local flag=""
  [ "$1" = new ] && flag="--new-connection"
  # shellcheck disable=SC2086
  in_cli /usr/bin/python3 "$root/perf/latency_client.py" "$ORIGIN4" / --requests "$requests" $flag
}

echo "== topology, origin (nginx)"
topology_up
origin_start
declare -A rows=()
paths="bridge $attach"
for ((r = 1; r <= runs; r++)); do
  for p in $paths; do
    echo "== run $r/$runs: $p"
    case "$p" in
      bridge)
        SLUICE_APPLIANCE=kernel-bridge appliance_start "$SLT_TMP/permissive.yaml" 1 "" || exit 1
        ;;
      *)
        rm -f "$SLT_TMP/state/buckets.snapshot"
        args=""
        [ "$p" = af-xdp ] && args="--af-xdp c1:o1"
        [ -n "$idle" ] && args="$args --idle-sleep $idle"
        SLUICE_APPLIANCE=sluiced appliance_start "$SLT_TMP/permissive.yaml" 1 "$args" || exit 1
        ;;
    esac
    for way in keep-alive new; do
      row="$(measure "$way")" || { echo "latency.sh: the $way measurement through $p failed" >&2; exit 1; }
      rows[$way,$p]+="$row"$'\n'
      echo "   $way: p50 p90 p99 max = $row us"
    done
    if [ "$p" = bridge ]; then SLUICE_APPLIANCE=kernel-bridge appliance_stop; else SLUICE_APPLIANCE=sluiced appliance_stop || true; fi
  done
done

median() { sort -n | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
column_median() { awk -v c="$1" 'NF { print $c }' | median; }
echo
echo "sequential GETs (nginx origin, $requests a run after 200 warm-up), medians of $runs runs' percentiles, us;" \
  "$(nproc) CPUs"
printf '%-15s %-28s %8s %8s %14s\n' "way" "path" "p50" "p99" "added p50/p99"
for way in keep-alive new; do
  b50="$(column_median 1 <<<"${rows[$way,bridge]}")"
  b99="$(column_median 3 <<<"${rows[$way,bridge]}")"
  for p in $paths; do
    case "$p" in
      bridge) name="Linux bridge" ;;
      af-packet) name="sluiced (AF_PACKET, 1 worker)" ;;
      af-xdp) name="sluiced (AF_XDP, 1 worker)" ;;
    esac
    p50="$(column_median 1 <<<"${rows[$way,$p]}")"
    p99="$(column_median 3 <<<"${rows[$way,$p]}")"
    added="-"
    [ "$p" != bridge ] && added="$(awk -v a="$p50" -v b="$b50" -v c="$p99" -v d="$b99" 'BEGIN { printf "%+.0f / %+.0f", a - b, c - d }')"
    printf '%-15s %-28s %8s %8s %14s\n' "$([ "$way" = new ] && echo "new connection" || echo "$way")" "$name" "$p50" "$p99" "$added"
  done
done
