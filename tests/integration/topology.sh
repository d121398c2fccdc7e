#!/usr/bin/env bash
# The integration tests' network: three namespaces joined by two veth pairs,
#
#   client ns (NS_CLI)            appliance ns (NS_BOX)             origin ns (NS_ORG)
#   c0 198.18.0.10/24  <--veth-->  c1   [sluiced | br0]   o1  <--veth-->  o0 198.18.0.20/24
#      2001:db8::10/64                 (no addresses, IPv6 off)              2001:db8::20/64
#
# plus the origin (nginx, origin.sh), the appliance in the middle (sluiced on
# the AF_PACKET PMD, or a Linux bridge standing in for it), helpers for packet
# impairment (tc netem, or a userspace stand-in where the kernel has no netem)
# and for a tiny MSS, and a teardown that always runs.
#
# Sourced by run.sh; also usable by hand:
#   tests/integration/topology.sh up [BUILD_DIR]   build it all, print how to use it, keep it
#   tests/integration/topology.sh down PREFIX      remove what `up` (or a kept run) left
#   tests/integration/topology.sh clean-stale      remove leftovers of crashed runs
#
# Environment: SLUICE_APPLIANCE=sluiced (default) | kernel-bridge;
# SLUICED=path (default BUILD_DIR/src/sluiced); SLUICED_EXTRA_ARGS (appended);
# SLUICE_READY_TIMEOUT (s, default 20); SLUICE_IMPAIR=auto | netem | shim.

SLT_HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
SLT_PY=/usr/bin/python3   # the system Python, never a pyenv shim

# Addresses: documentation/benchmarking ranges only (RFC 2544, RFC 3849).
ORIGIN4=198.18.0.20
ORIGIN6=2001:db8::20
CLIENT4=198.18.0.10       # the client's primary address (Chromium, readiness probes)
CLIENT6=2001:db8::10
# Tests take their source addresses from these pools (one key per test):
# 198.18.0.40-239 and 2001:db8::1:0-c7 (hex): two of each per registered
# test, room for 100 (run.sh refuses a registry that outgrows it).
# Addresses a test adds for itself (wire-slow-head-crowd's 240-247) lie
# past them.
SLT_POOL4_FIRST=40
SLT_POOL_SIZE=200

slt_log() { printf '[%(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

# ---------------------------------------------------------------- naming

# slt_init PREFIX: the names and the temp dir for one run.
slt_init() {
  SLT_PREFIX="$1"
  NS_CLI="$SLT_PREFIX-cli"
  NS_BOX="$SLT_PREFIX-box"
  NS_ORG="$SLT_PREFIX-org"
  if [ -z "${SLT_TMP:-}" ] || [ ! -d "$SLT_TMP" ]; then
    SLT_TMP="$(mktemp -d "/tmp/$SLT_PREFIX.XXXXXX")"
  fi
  mkdir -p "$SLT_TMP/pids"
  export SLT_PREFIX NS_CLI NS_BOX NS_ORG SLT_TMP
}

# Remembers a background process for teardown (the namespaces' pid sweep
# catches the rest).
slt_track_pid() { : >"$SLT_TMP/pids/$1"; }

in_cli() { ip netns exec "$NS_CLI" "$@"; }
in_box() { ip netns exec "$NS_BOX" "$@"; }
in_org() { ip netns exec "$NS_ORG" "$@"; }

# ---------------------------------------------------------------- build

# Checksum and segmentation offloads off: sluiced computes checksums in
# software, and the tests want segments on the wire exactly as TCP cut them.
slt_offloads_off() {
  local ns="$1" ifc="$2"
  ip netns exec "$ns" ethtool -K "$ifc" rx off tx off tso off gso off gro off lro off >/dev/null 2>&1 || true
  # Verify the ones that matter rather than trusting ethtool's exit status.
  local k
  k="$(ip netns exec "$ns" ethtool -k "$ifc" 2>/dev/null)" || { slt_log "ethtool -k $ifc failed in $ns"; return 1; }
  if grep -qE '^(rx-checksumming|tx-checksumming|tcp-segmentation-offload|generic-segmentation-offload|generic-receive-offload): on' <<<"$k"; then
    slt_log "offloads still on for $ifc in $ns:"; grep -E ': on' <<<"$k" | head -5 >&2; return 1
  fi
}

topology_up() {
  local ns
  for ns in "$NS_CLI" "$NS_BOX" "$NS_ORG"; do
    ip netns add "$ns" || return 1
    ip -n "$ns" link set lo up || return 1
  done
  # The appliance's own ends must send nothing (design.md 7: the AF_PACKET PMD
  # also receives what the host sends there): no IPv6 anywhere in that
  # namespace, set before the links exist so they are born without it.
  in_box sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1 || return 1
  ip -n "$NS_BOX" link add c1 type veth peer name c0 netns "$NS_CLI" || return 1
  ip -n "$NS_BOX" link add o1 type veth peer name o0 netns "$NS_ORG" || return 1
  in_box sysctl -qw net.ipv6.conf.c1.disable_ipv6=1 net.ipv6.conf.o1.disable_ipv6=1 || return 1
  in_box sysctl -qw net.ipv4.conf.all.arp_ignore=8 net.ipv4.conf.default.arp_ignore=8 >/dev/null 2>&1 || true

  # Client and origin: no DAD (addresses usable at once, nginx can bind), no
  # router solicitations (less noise on the wire).
  local side ifc
  for side in "$NS_CLI:c0" "$NS_ORG:o0"; do
    ns="${side%%:*}" ifc="${side##*:}"
    ip netns exec "$ns" sysctl -qw "net.ipv6.conf.$ifc.accept_dad=0" "net.ipv6.conf.$ifc.accept_ra=0" \
      "net.ipv6.conf.$ifc.router_solicitations=0" "net.ipv6.conf.default.accept_dad=0" || return 1
  done

  for side in "$NS_CLI:c0" "$NS_BOX:c1" "$NS_BOX:o1" "$NS_ORG:o0"; do
    ns="${side%%:*}" ifc="${side##*:}"
    slt_offloads_off "$ns" "$ifc" || return 1
    ip -n "$ns" link set "$ifc" promisc on up || return 1
  done

  ip -n "$NS_ORG" addr add "$ORIGIN4/24" dev o0 || return 1
  ip -n "$NS_ORG" -6 addr add "$ORIGIN6/64" dev o0 nodad || return 1
  ip -n "$NS_CLI" addr add "$CLIENT4/24" dev c0 || return 1
  ip -n "$NS_CLI" -6 addr add "$CLIENT6/64" dev c0 nodad || return 1
  # The per-test source address pools, in one batch.
  local i batch="$SLT_TMP/addr.batch"
  : >"$batch"
  for ((i = 0; i < SLT_POOL_SIZE; i++)); do
    echo "addr add 198.18.0.$((SLT_POOL4_FIRST + i))/24 dev c0" >>"$batch"
    printf 'addr add 2001:db8::1:%x/64 dev c0 nodad\n' "$i" >>"$batch"
  done
  ip -n "$NS_CLI" -batch "$batch" || return 1
  # Neither end is a router: on-link routes only, nothing leaves 198.18.0.0/24.
  return 0
}

# The source addresses a test owns (index from run.sh), so that every test
# has budgets of its own: src4 [N], src6 [N], N in 0..1.
src4() { echo "198.18.0.$((SLT_POOL4_FIRST + 2 * ${SLT_TEST_INDEX:-0} + ${1:-0}))"; }
src6() { printf '2001:db8::1:%x\n' "$((2 * ${SLT_TEST_INDEX:-0} + ${1:-0}))"; }

# ---------------------------------------------------------------- teardown

# Kills every process in a namespace (all of them are ours: nothing else runs
# in a namespace this harness created), then deletes it. Deleting a
# namespace deletes its veths.
slt_ns_delete() {
  local ns="$1" pids p tries
  ip netns list 2>/dev/null | awk '{print $1}' | grep -qxF "$ns" || return 0
  for tries in 1 2 3 4 5 6 7 8 9 10; do
    pids="$(ip netns pids "$ns" 2>/dev/null)"
    [ -z "$pids" ] && break
    for p in $pids; do
      if [ "$tries" -lt 6 ]; then kill -TERM "$p" 2>/dev/null; else kill -KILL "$p" 2>/dev/null; fi
    done
    sleep 0.3
  done
  ip netns delete "$ns" 2>/dev/null || true
}

slt_kill_tracked() {
  local f p i alive
  for f in "$SLT_TMP"/pids/*; do
    [ -e "$f" ] || continue
    kill -TERM "$(basename "$f")" 2>/dev/null
  done
  for ((i = 0; i < 20; i++)); do  # up to 2 s to exit by themselves
    alive=0
    for f in "$SLT_TMP"/pids/*; do
      [ -e "$f" ] || continue
      kill -0 "$(basename "$f")" 2>/dev/null && alive=1
    done
    [ "$alive" = 0 ] && break
    sleep 0.1
  done
  for f in "$SLT_TMP"/pids/*; do
    [ -e "$f" ] || continue
    p="$(basename "$f")"
    kill -0 "$p" 2>/dev/null && kill -KILL "$p" 2>/dev/null
    { wait "$p"; } 2>/dev/null   # reap our own children quietly
    rm -f "$f"
  done
}

# Always safe to call, any number of times.
topology_down() {
  [ -n "${SLT_PREFIX:-}" ] || return 0
  [ -n "${SLT_TMP:-}" ] && [ -d "$SLT_TMP/pids" ] && slt_kill_tracked
  slt_ns_delete "$NS_CLI"
  slt_ns_delete "$NS_BOX"
  slt_ns_delete "$NS_ORG"
  if [ -n "${SLT_TMP:-}" ] && [ -d "$SLT_TMP" ] && [ "${SLT_KEEP_TMP:-0}" != 1 ]; then
    rm -rf "$SLT_TMP"
  fi
}

# Leftovers of earlier runs that crashed (their run's pid is gone): namespaces
# slt-PID-* and temp dirs /tmp/slt-PID.*. Kept runs (sltk-*) are left alone.
slt_clean_stale() {
  local name pid d
  for name in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E '^slt-[0-9]+-(cli|box|org)$'); do
    pid="${name#slt-}" pid="${pid%%-*}"
    if ! kill -0 "$pid" 2>/dev/null; then
      slt_log "removing stale namespace $name (run $pid is gone)"
      slt_ns_delete "$name"
    fi
  done
  for d in /tmp/slt-[0-9]*.*; do
    [ -d "$d" ] || continue
    pid="${d#/tmp/slt-}" pid="${pid%%.*}"
    kill -0 "$pid" 2>/dev/null || rm -rf "$d"
  done
}

# ---------------------------------------------------------------- appliance

# Which appliance sits in the box namespace.
SLUICE_APPLIANCE="${SLUICE_APPLIANCE:-sluiced}"
SLT_APPLIANCE_PID=""
SLT_APPLIANCE_LOG=""
SLT_APPLIANCE_N=0
# shellcheck disable=SC2034  # read by run.sh
SLT_APPLIANCE_CONF=""   # "policy-file workers args" of the running one

# Whether this kernel lets a process open AF_XDP sockets (address family 44).
slt_have_af_xdp() {
  "$SLT_PY" -c 'import socket; socket.socket(44, socket.SOCK_RAW).close()' 2>/dev/null
}

# Whether DPDK's tap driver can make its ports here (--ports-tap).
slt_have_tun() {
  [ -c /dev/net/tun ] && [ -r /dev/net/tun ] && [ -w /dev/net/tun ]
}

# The attachments a perf script runs sluiced on, from its --attach
# (af-packet, af-xdp, both, or auto: AF_XDP too where the kernel has AF_XDP
# sockets), printed as a list. Says why, on stderr as PROGRAM, and returns 1
# when AF_XDP is asked for and the kernel has none.
slt_attach_modes() {  # PROGRAM ATTACH
  local prog="$1" attach="$2"
  case "$attach" in
    auto)
      if slt_have_af_xdp; then echo "af-packet af-xdp"; return 0; fi
      echo "$prog: this kernel has no AF_XDP sockets: sluiced on AF_PACKET only" >&2
      echo af-packet
      return 0
      ;;
    both) attach="af-packet af-xdp" ;;
  esac
  if [[ "$attach" == *af-xdp* ]] && ! slt_have_af_xdp; then
    echo "$prog: --attach $attach: this kernel has no AF_XDP sockets" >&2
    return 1
  fi
  echo "$attach"
}

slt_probe_origin() {  # one readiness probe, from the client, through the appliance
  local code
  code="$(in_cli curl --noproxy '*' -sS -o /dev/null -w '%{http_code}' --connect-timeout 1 --max-time 1 \
    "http://$ORIGIN4/healthz" 2>/dev/null)"
  [ "$code" = 200 ]
}

# appliance_start POLICY_FILE WORKERS [ARGS]: starts the appliance (with
# ARGS, words, added to its command line) and waits until a
# request from the client reaches the origin through it. On failure prints
# why (and sluiced's log) and returns 1.
# Waits (up to 20 s, while PID lives) for sluiced's tap ports slt-t0 and
# slt-t1 in the appliance's namespace, then joins each to its side's veth
# with a bridge: client c0 - c1 - br-tc - slt-t0 = sluiced = slt-t1 - br-to
# - o1 - o0 origin. The taps go when sluiced does; slt_tap_unwire removes
# the bridges.
slt_tap_wire() {
  local pid="$1" i
  for ((i = 0; i < 100; i++)); do
    kill -0 "$pid" 2>/dev/null || return 1
    ip -n "$NS_BOX" link show slt-t1 >/dev/null 2>&1 && ip -n "$NS_BOX" link show slt-t0 >/dev/null 2>&1 && break
    sleep 0.2
  done
  [ "$i" -lt 100 ] || return 1
  # br_netfilter, where the host has it loaded, would run the IP hooks on
  # bridged frames and drop a bad IPv4 header checksum before the appliance
  # sees it (the sysctls are per namespace).
  local k
  for k in iptables ip6tables arptables; do
    ip netns exec "$NS_BOX" sysctl -qw "net.bridge.bridge-nf-call-$k=0" 2>/dev/null
  done
  local br side
  for side in c o; do
    br="br-t$side"
    ip -n "$NS_BOX" link add "$br" type bridge stp_state 0 forward_delay 0 mcast_snooping 0 \
      nf_call_iptables 0 nf_call_ip6tables 0 nf_call_arptables 0 || return 1
    ip -n "$NS_BOX" link set "${side}1" master "$br" || return 1
    ip -n "$NS_BOX" link set "slt-t$([ "$side" = c ] && echo 0 || echo 1)" master "$br" || return 1
    ip -n "$NS_BOX" link set "$br" up || return 1
  done
}
slt_tap_unwire() {
  ip -n "$NS_BOX" link del br-tc 2>/dev/null
  ip -n "$NS_BOX" link del br-to 2>/dev/null
  return 0
}

appliance_start() {
  local policy="$1" workers="${2:-1}" args="${3:-}" deadline
  SLT_APPLIANCE_N=$((SLT_APPLIANCE_N + 1))
  SLT_APPLIANCE_LOG="${SLT_LOG_DIR:-$SLT_TMP}/appliance-$SLT_APPLIANCE_N.log"
  case "$SLUICE_APPLIANCE" in
    kernel-bridge)
      {
        echo "kernel-bridge stand-in: br0 joins c1 and o1 (policy $policy and --workers $workers are ignored)"
      } >"$SLT_APPLIANCE_LOG"
      ip -n "$NS_BOX" link add br0 type bridge stp_state 0 forward_delay 0 mcast_snooping 0 || return 1
      ip -n "$NS_BOX" link set c1 master br0 || return 1
      ip -n "$NS_BOX" link set o1 master br0 || return 1
      ip -n "$NS_BOX" link set br0 up || return 1
      ;;
    sluiced)
      if [ ! -x "${SLUICED:-}" ]; then
        echo "sluiced not found or not executable at '${SLUICED:-}' (build it, set SLUICED=/path/to/sluiced, or run the plumbing against SLUICE_APPLIANCE=kernel-bridge)"
        return 1
      fi
      # shellcheck disable=SC2086  # SLUICED_EXTRA_ARGS is a list of words
      # Its control socket and state directory live in this run's directory,
      # so runs never meet (a restart within a run keeps the state); its
      # Prometheus endpoint on the appliance namespace's own loopback.
      SLT_CONTROL_SOCKET="$SLT_TMP/control.sock"
      # AF_PACKET unless the test's ARGS attach it through AF_XDP (which, in
      # copy mode, needs the full checksums slt_offloads_off asks the
      # client's and origin's stacks for: a veth otherwise hands on partial
      # ones).
      local attach="--af-packet c1:o1" eal=""
      case " $args " in *" --af-xdp "*) attach="" ;; esac
      # --ports-tap (the harness's word, not sluiced's): --ports mode on two
      # DPDK tap ports (net_tap), whose kernel ends slt_tap_wire bridges to
      # c1 and o1 once sluiced has made them. A port with receive and
      # transmit checksum offload (the tap driver does both in software),
      # where AF_PACKET has neither.
      case " $args " in
        *" --ports-tap "*)
          args="${args/--ports-tap/}"
          attach="--ports 0:1"
          eal="-- --no-huge --no-shconf --no-pci -m 256 --file-prefix slt-tap"
          eal+=" --vdev=net_tap0,iface=slt-t0 --vdev=net_tap1,iface=slt-t1"
          ;;
      esac
      # An AF_XDP sluiced that was killed leaves its XDP program on the
      # interfaces (it passes what no socket takes, but nothing should sit
      # in front of the next appliance).
      in_box ip link set dev c1 xdp off 2>/dev/null
      in_box ip link set dev o1 xdp off 2>/dev/null
      # shellcheck disable=SC2086  # attach is a list of words
      ip netns exec "$NS_BOX" "$SLUICED" --config "$policy" $attach --workers "$workers" \
        --control-socket "$SLT_CONTROL_SOCKET" --metrics 127.0.0.1:9464 --state-dir "$SLT_TMP/state" $args ${SLUICED_EXTRA_ARGS:-} $eal >"$SLT_APPLIANCE_LOG" 2>&1 </dev/null &
      SLT_APPLIANCE_PID=$!   # `ip netns exec` execs in place: this is sluiced's pid
      slt_track_pid "$SLT_APPLIANCE_PID"
      if [ -n "$eal" ] && ! slt_tap_wire "$SLT_APPLIANCE_PID"; then
        echo "the tap ports never appeared in $NS_BOX; sluiced's log ($SLT_APPLIANCE_LOG):"
        tail -n 30 "$SLT_APPLIANCE_LOG" | sed 's/^/  | /'
        appliance_stop >/dev/null
        return 1
      fi
      ;;
    *)
      echo "unknown SLUICE_APPLIANCE='$SLUICE_APPLIANCE' (sluiced or kernel-bridge)"
      return 1
      ;;
  esac
  deadline=$((SECONDS + ${SLUICE_READY_TIMEOUT:-20}))
  while :; do
    if [ -n "$SLT_APPLIANCE_PID" ] && ! kill -0 "$SLT_APPLIANCE_PID" 2>/dev/null; then
      wait "$SLT_APPLIANCE_PID" 2>/dev/null
      echo "sluiced exited (status $?) before it forwarded a request; its log ($SLT_APPLIANCE_LOG):"
      tail -n 60 "$SLT_APPLIANCE_LOG" | sed 's/^/  | /'
      SLT_APPLIANCE_PID=""
      return 1
    fi
    slt_probe_origin && break
    if [ "$SECONDS" -ge "$deadline" ]; then
      echo "appliance ($SLUICE_APPLIANCE) not forwarding after ${SLUICE_READY_TIMEOUT:-20}s: GET http://$ORIGIN4/healthz from the client got no 200; its log ($SLT_APPLIANCE_LOG):"
      tail -n 60 "$SLT_APPLIANCE_LOG" | sed 's/^/  | /'
      appliance_stop >/dev/null
      return 1
    fi
    sleep 0.2
  done
  SLT_APPLIANCE_CONF="$policy $workers $args"
  return 0
}

# Stops the appliance. Prints a complaint and returns 1 when sluiced did not
# exit by itself within 10 s of SIGTERM, or exited with a non-zero status.
# Kills sluiced as a crash would (SIGKILL: no clean stop, nothing saved on
# the way out), for the tests of what survives one.
appliance_kill() {
  local pid="$SLT_APPLIANCE_PID"
  # shellcheck disable=SC2034  # read by run.sh
  SLT_APPLIANCE_CONF=""
  [ -n "$pid" ] || return 0
  SLT_APPLIANCE_PID=""
  kill -KILL "$pid" 2>/dev/null
  date +%s.%N >"$SLT_TMP/killed_at"  # what a fallback gave back is measured to here
  wait "$pid" 2>/dev/null
  slt_tap_unwire
  return 0
}

appliance_stop() {
  local rc=0 pid="$SLT_APPLIANCE_PID" i status
  # shellcheck disable=SC2034  # read by run.sh
  SLT_APPLIANCE_CONF=""
  case "$SLUICE_APPLIANCE" in
    kernel-bridge)
      ip -n "$NS_BOX" link del br0 2>/dev/null
      return 0
      ;;
  esac
  [ -n "$pid" ] || return 0
  SLT_APPLIANCE_PID=""
  kill -TERM "$pid" 2>/dev/null
  for ((i = 0; i < 100; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    echo "sluiced did not exit within 10 s of SIGTERM (killed)"
    rc=1
  else
    wait "$pid" 2>/dev/null
    status=$?
    if [ "$status" -ne 0 ]; then
      echo "sluiced exited with status $status after SIGTERM; log tail ($SLT_APPLIANCE_LOG):"
      tail -n 20 "$SLT_APPLIANCE_LOG" | sed 's/^/  | /'
      rc=1
    fi
  fi
  rm -f "$SLT_TMP/pids/$pid"
  slt_tap_unwire
  return $rc
}

# ---------------------------------------------------------------- tiny MSS

# mss_set N: the origin advertises MSS N, so the client's segments carry at
# most N bytes (request heads split across segments); the client advertises
# it too, so the origin's responses are split as well. mss_clear undoes it.
# The SYN proxy promises a client the MSS the origin showed in its last
# SYN-ACK (dataplane/origin_profiles.h): one connection from the client's
# primary address (no test's own) lets it see the new one.
mss_set() {
  local mss="$1"
  ip -n "$NS_ORG" route change 198.18.0.0/24 dev o0 proto kernel scope link src "$ORIGIN4" advmss "$mss" &&
    ip -n "$NS_ORG" -6 route change 2001:db8::/64 dev o0 proto kernel metric 256 advmss "$mss" &&
    ip -n "$NS_CLI" route change 198.18.0.0/24 dev c0 proto kernel scope link src "$CLIENT4" advmss "$mss" &&
    ip -n "$NS_CLI" -6 route change 2001:db8::/64 dev c0 proto kernel metric 256 advmss "$mss" &&
    mss_seen
}
mss_clear() {
  ip -n "$NS_ORG" route change 198.18.0.0/24 dev o0 proto kernel scope link src "$ORIGIN4"
  ip -n "$NS_ORG" -6 route change 2001:db8::/64 dev o0 proto kernel metric 256
  ip -n "$NS_CLI" route change 198.18.0.0/24 dev c0 proto kernel scope link src "$CLIENT4"
  ip -n "$NS_CLI" -6 route change 2001:db8::/64 dev c0 proto kernel metric 256
  mss_seen
}
mss_seen() {
  ip netns exec "$NS_CLI" curl -s -o /dev/null --max-time 5 --interface "$CLIENT4" "http://$ORIGIN4/" >/dev/null 2>&1
  ip netns exec "$NS_CLI" curl -s -o /dev/null --max-time 5 --interface "$CLIENT6" "http://[$ORIGIN6]/" >/dev/null 2>&1
  return 0
}

# ---------------------------------------------------------------- impairment

# Packet impairment on the frames the client sends into the appliance (c0
# egress) and the frames the origin sends into it (o0 egress): what
# `tc qdisc add dev c0 root netem ...` and the same on o0 do.
#   impair_on LOSS% DUP% REORDER% DELAY_MS   e.g. impair_on 5 5 25 10
#   impair_off
# SLUICE_IMPAIR=netem uses tc netem; shim uses impair.py, a userspace netem
# (the frames are redirected with tc mirred to a veth the shim reads and are
# sent on with PACKET_QDISC_BYPASS); auto (default) takes netem where the
# kernel has it. The shim impairs TCP frames only, so ARP and neighbour
# discovery are never lost. impair_stats prints what was done.
SLT_IMPAIR_KIND=""

slt_have_netem() {
  tc -n "$NS_CLI" qdisc add dev lo root netem delay 0ms 2>/dev/null || return 1
  tc -n "$NS_CLI" qdisc del dev lo root 2>/dev/null
  return 0
}

impair_on() {
  local loss="$1" dup="$2" reorder="$3" delay="$4" kind="${SLUICE_IMPAIR:-auto}" side ns ifc seed=1
  if [ "$kind" = auto ]; then
    if slt_have_netem; then kind=netem; else kind=shim; fi
  fi
  SLT_IMPAIR_KIND="$kind"
  for side in "$NS_CLI:c0" "$NS_ORG:o0"; do
    ns="${side%%:*}" ifc="${side##*:}"
    case "$kind" in
      netem)
        tc -n "$ns" qdisc replace dev "$ifc" root netem limit 10000 delay "${delay}ms" \
          reorder "${reorder}%" loss "${loss}%" duplicate "${dup}%" || return 1
        ;;
      shim)
        slt_shim_start "$ns" "$ifc" impair impair.py --loss "$loss" --dup "$dup" --reorder "$reorder" \
          --delay-ms "$delay" --seed "$seed" || return 1
        seed=2
        ;;
      *) echo "unknown SLUICE_IMPAIR='$kind' (auto, netem or shim)"; return 1 ;;
    esac
  done
}

impair_stats() {
  local side ns ifc
  for side in "$NS_CLI:c0" "$NS_ORG:o0"; do
    ns="${side%%:*}" ifc="${side##*:}"
    case "$SLT_IMPAIR_KIND" in
      netem) printf '%s netem: %s\n' "$ifc" "$(tc -n "$ns" -s qdisc show dev "$ifc" | grep -o 'Sent.*' | head -1)" ;;
      shim) printf '%s shim: %s\n' "$ifc" "$(cat "$SLT_TMP/impair-$ifc.stats" 2>/dev/null)" ;;
    esac
  done
}

# Prints the number of frames the impairment dropped or duplicated so far.
impair_events() {
  local side ns ifc n=0 v
  for side in "$NS_CLI:c0" "$NS_ORG:o0"; do
    ns="${side%%:*}" ifc="${side##*:}"
    case "$SLT_IMPAIR_KIND" in
      netem)
        v="$(tc -n "$ns" -s qdisc show dev "$ifc" | sed -n 's/.*(dropped \([0-9]*\),.*/\1/p' | head -1)"
        n=$((n + ${v:-0}))
        ;;
      shim)
        v="$("$SLT_PY" -c 'import json,sys; s=json.load(open(sys.argv[1])); print(s["dropped"]+s["duplicated"])' \
          "$SLT_TMP/impair-$ifc.stats" 2>/dev/null)"
        n=$((n + ${v:-0}))
        ;;
    esac
  done
  echo "$n"
}

impair_off() {
  local side ns ifc pid i
  for side in "$NS_CLI:c0" "$NS_ORG:o0"; do
    ns="${side%%:*}" ifc="${side##*:}"
    case "$SLT_IMPAIR_KIND" in
      netem) tc -n "$ns" qdisc del dev "$ifc" root 2>/dev/null ;;
      shim) slt_shim_stop "$ns" "$ifc" impair ;;
    esac
  done
  SLT_IMPAIR_KIND=""
}

# ---------------------------------------------------------------- frame shims

# slt_shim_start NS IFC NAME SCRIPT ARGS...: every frame leaving IFC (in NS)
# goes through SCRIPT (impair.py, mangle.py) instead: tc mirred redirects it
# to a veth (sx0) whose peer (sx1) the script reads; the script sends the
# result on IFC with PACKET_QDISC_BYPASS, past the redirect. Its JSON stats
# go to $SLT_TMP/NAME-IFC.stats (their first write says it is ready).
slt_shim_start() {
  local ns="$1" ifc="$2" name="$3" script="$4" i stats
  shift 4
  stats="$SLT_TMP/$name-$ifc.stats"
  ip -n "$ns" link add sx0 type veth peer name sx1 || return 1
  ip netns exec "$ns" sysctl -qw net.ipv6.conf.sx0.disable_ipv6=1 net.ipv6.conf.sx1.disable_ipv6=1 || return 1
  slt_offloads_off "$ns" sx0 || return 1
  slt_offloads_off "$ns" sx1 || return 1
  ip -n "$ns" link set sx0 up || return 1
  ip -n "$ns" link set sx1 promisc on up || return 1
  rm -f "$stats"
  ip netns exec "$ns" "$SLT_PY" "$SLT_HERE/$script" --in sx1 --out "$ifc" --stats "$stats" "$@" \
    >"$SLT_TMP/$name-$ifc.log" 2>&1 &
  echo $! >"$SLT_TMP/$name-$ifc.pid"
  slt_track_pid $!
  for ((i = 0; i < 50; i++)); do
    [ -s "$stats" ] && break
    sleep 0.1
  done
  [ -s "$stats" ] || { echo "$script did not start on $ifc:"; cat "$SLT_TMP/$name-$ifc.log"; return 1; }
  tc -n "$ns" qdisc add dev "$ifc" clsact || return 1
  tc -n "$ns" filter add dev "$ifc" egress protocol all prio 1 u32 match u32 0 0 \
    action mirred egress redirect dev sx0 || return 1
}

# slt_shim_stop NS IFC NAME: the redirect removed, the script stopped (on
# SIGTERM it sends what it holds and writes its stats), the veth deleted.
slt_shim_stop() {
  local ns="$1" ifc="$2" name="$3" pid i
  tc -n "$ns" qdisc del dev "$ifc" clsact 2>/dev/null
  pid="$(cat "$SLT_TMP/$name-$ifc.pid" 2>/dev/null)"
  if [ -n "$pid" ]; then
    kill -TERM "$pid" 2>/dev/null
    for ((i = 0; i < 30; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null
    rm -f "$SLT_TMP/pids/$pid" "$SLT_TMP/$name-$ifc.pid"
  fi
  ip -n "$ns" link del sx0 2>/dev/null
}

# The client's frames rewritten as an attacker's stack would send them
# (mangle.py: ipv6-dstopts, ipv4-options, overlap-decoy):
#   mangle_on MODE [ARGS...]     e.g. mangle_on ipv6-dstopts --count 9
#   mangle_off
#   mangle_count KEY             one of mangle.py's counters (frames, rewritten,
#                                decoys), final once mangle_off has run
mangle_on() {
  local mode="$1"
  shift
  slt_shim_start "$NS_CLI" c0 mangle mangle.py --mode "$mode" "$@"
}
mangle_off() { slt_shim_stop "$NS_CLI" c0 mangle; }
# The same on the origin's side (what leaves o0): origin_mangle_on MODE [ARGS...].
origin_mangle_on() {
  local mode="$1"
  shift
  slt_shim_start "$NS_ORG" o0 mangle mangle.py --mode "$mode" "$@"
}
origin_mangle_off() { slt_shim_stop "$NS_ORG" o0 mangle; }
# mangle_stat_of IFC KEY: a counter of the mangle.py on IFC (c0 or o0).
mangle_stat_of() {
  "$SLT_PY" -c 'import json,sys; print(json.load(open(sys.argv[1])).get(sys.argv[2], "?"))' \
    "$SLT_TMP/mangle-$1.stats" "$2" 2>/dev/null || echo "?"
}
mangle_count() {
  "$SLT_PY" -c 'import json,sys; print(json.load(open(sys.argv[1])).get(sys.argv[2], "?"))' \
    "$SLT_TMP/mangle-c0.stats" "$1" 2>/dev/null || echo "?"
}

# ---------------------------------------------------------------- by hand

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -uo pipefail
  . "$SLT_HERE/origin.sh"
  cmd="${1:-}"
  case "$cmd" in
    up)
      set -eE   # any failure while building: remove what was built (ERR trap)
      build="${2:-build}"
      SLUICED="${SLUICED:-$(cd "$build" 2>/dev/null && pwd)/src/sluiced}"
      slt_clean_stale
      slt_init "sltk-$$"
      trap 'echo "topology.sh up failed; removing what it built" >&2; topology_down' ERR
      topology_up
      origin_start
      appliance_start "${SLUICE_POLICY:-$SLT_HERE/../../config/three-budgets.yaml}" "${SLUICE_WORKERS:-1}"
      trap - ERR
      cat <<EOF
Up (kept): namespaces $NS_CLI, $NS_BOX, $NS_ORG; files in $SLT_TMP
  appliance: $SLUICE_APPLIANCE ${SLT_APPLIANCE_PID:+(pid $SLT_APPLIANCE_PID, log $SLT_APPLIANCE_LOG)}
  try:       ip netns exec $NS_CLI curl -i http://$ORIGIN4/
             ip netns exec $NS_CLI $SLT_PY $SLT_HERE/http_client.py --host $ORIGIN4 --count 3
  origin log: $SLT_TMP/nginx/access.log
  remove:    $0 down $SLT_PREFIX
EOF
      ;;
    down)
      [ -n "${2:-}" ] || { echo "usage: $0 down PREFIX (e.g. sltk-1234)" >&2; exit 2; }
      SLT_PREFIX="$2" NS_CLI="$2-cli" NS_BOX="$2-box" NS_ORG="$2-org"
      SLT_TMP="$(find /tmp -maxdepth 1 -name "$2.*" -type d 2>/dev/null | head -1)"
      topology_down
      ip netns list 2>/dev/null | awk '{print $1}' | grep -q "^$2-" && { echo "some of $2-* could not be removed" >&2; exit 1; }
      exit 0
      ;;
    clean-stale) slt_clean_stale ;;
    *) echo "usage: $0 up [BUILD_DIR] | down PREFIX | clean-stale" >&2; exit 2 ;;
  esac
fi
