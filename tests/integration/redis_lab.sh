#!/usr/bin/env bash
# A Redis Cluster for the integration tests: Debian's redis-server (7.0),
# N nodes on one address of a network namespace, one port each, each node
# in a directory of its own (no persistence: --save "" --appendonly no), made
# a cluster with `redis-cli --cluster create`. Sourced by cluster.sh.
#
#   redis_lab_init NS HOST DIR PORT...   where the nodes run (no process yet)
#   redis_lab_start                      starts every node (fresh: DIR/PORT emptied), waits for PING
#   redis_lab_create REPLICAS            redis-cli --cluster create, then waits for cluster_state:ok
#   redis_lab_wait_ok SECONDS            every live node says cluster_state:ok and serves all slots
#   redis_lab_kill PORT                  SIGKILL, by its pid, and reaped
#   redis_lab_kill_all
#   redis_lab_cli PORT ARGS...           redis-cli against one node (bounded by timeout)
#   redis_lab_primaries                  the ports of the live primaries that hold slots
#   redis_lab_slot_owner SLOT            the port of the live primary serving SLOT (empty if none)
#   redis_lab_keys PATTERN               "PORT KEY" for every key on every live primary
#   redis_lab_alive                      the ports whose node is running
#
# Nodes are stopped by their pids only (RL_PID[port], also in DIR/PORT/pid);
# a pid is forgotten once it is reaped.
#
# Authentication, as production runs it, when set before redis_lab_start:
#   RL_PASS                       requirepass (the default user, which the
#                                 lab's own redis-cli and the replicas use)
#   RL_USER RL_USER_PASS RL_USER_KEYS   an ACL user for the application,
#                                 confined to keys matching RL_USER_KEYS and
#                                 to what is not @dangerous (plus CLUSTER SLOTS)
#   RL_TLS_DIR                    TLS only, clients, replication and the
#                                 cluster bus (ca.crt, server.crt, server.key
#                                 there); no plain-text port

RL_NS=""
RL_HOST=""
RL_DIR=""
RL_PORTS=()
declare -A RL_PID=()
RL_STARTED=()   # every node pid ever started
RL_PASS="${RL_PASS:-}"
RL_USER="${RL_USER:-}" RL_USER_PASS="${RL_USER_PASS:-}" RL_USER_KEYS="${RL_USER_KEYS:-}"
RL_TLS_DIR="${RL_TLS_DIR:-}"

# The lab's own redis-cli arguments: TLS, and the default user.
redis_lab_auth_args() {
  [ -n "$RL_TLS_DIR" ] && printf '%s\n' --tls --cacert "$RL_TLS_DIR/ca.crt"
  [ -n "$RL_PASS" ] && printf '%s\n' -a "$RL_PASS" --no-auth-warning
  return 0
}

redis_lab_init() {
  RL_NS="$1" RL_HOST="$2" RL_DIR="$3"
  shift 3
  RL_PORTS=("$@")
  mkdir -p "$RL_DIR"
}

redis_lab_cli() {
  local port="$1"
  shift
  local auth
  mapfile -t auth < <(redis_lab_auth_args)
  timeout -k 1 10 ip netns exec "$RL_NS" redis-cli -h "$RL_HOST" -p "$port" "${auth[@]}" "$@"
}

redis_lab_alive() {
  local p out=()
  for p in "${RL_PORTS[@]}"; do
    [ -n "${RL_PID[$p]:-}" ] && kill -0 "${RL_PID[$p]}" 2>/dev/null && out+=("$p")
  done
  echo "${out[*]}"
}

# Starts one node, fresh (its directory emptied: no nodes.conf, no data).
# Must run in the caller's shell (not in $(...)): the node is its child.
redis_lab_start_one() {
  local port="$1" d="$RL_DIR/$1" auth=()
  rm -rf "$d"
  mkdir -p "$d"
  [ -n "$RL_PASS" ] && auth+=(--requirepass "$RL_PASS" --masterauth "$RL_PASS")
  [ -n "$RL_USER" ] && auth+=(--user "$RL_USER" on ">$RL_USER_PASS" "~$RL_USER_KEYS" +@all -@dangerous '+cluster|slots')
  local listen=(--port "$port")
  [ -n "$RL_TLS_DIR" ] && listen=(--port 0 --tls-port "$port" --tls-cluster yes --tls-replication yes
    --tls-cert-file "$RL_TLS_DIR/server.crt" --tls-key-file "$RL_TLS_DIR/server.key"
    --tls-ca-cert-file "$RL_TLS_DIR/ca.crt" --tls-auth-clients no)
  ip netns exec "$RL_NS" redis-server --bind "$RL_HOST" "${listen[@]}" --protected-mode no \
    --daemonize no --dir "$d" --logfile "$d/redis.log" \
    --cluster-enabled yes --cluster-config-file "$d/nodes.conf" --cluster-node-timeout 1000 \
    --cluster-replica-validity-factor 0 --repl-diskless-sync-delay 0 \
    --save "" --appendonly no "${auth[@]}" </dev/null >"$d/stdout.log" 2>&1 &
  RL_PID[$port]=$!   # `ip netns exec` execs in place: this is redis-server's pid
  echo "$!" >"$d/pid"
  RL_STARTED+=("$!")
  [ "$(type -t slt_track_pid)" = function ] && slt_track_pid "$!"
  return 0
}

redis_lab_start() {
  local p i ok
  for p in "${RL_PORTS[@]}"; do redis_lab_start_one "$p"; done
  for ((i = 0; i < 100; i++)); do
    ok=1
    for p in "${RL_PORTS[@]}"; do
      if ! kill -0 "${RL_PID[$p]}" 2>/dev/null; then
        echo "redis-server on port $p exited at start: $(tail -n 5 "$RL_DIR/$p/redis.log" "$RL_DIR/$p/stdout.log" 2>/dev/null | tr '\n' ' ')"
        return 1
      fi
      [ "$(redis_lab_cli "$p" PING 2>/dev/null)" = PONG ] || ok=0
    done
    [ "$ok" = 1 ] && return 0
    sleep 0.1
  done
  echo "redis-server nodes did not answer PING within 10 s"
  return 1
}

redis_lab_create() {
  local replicas="$1" p nodes=()
  for p in "${RL_PORTS[@]}"; do nodes+=("$RL_HOST:$p"); done
  local auth
  mapfile -t auth < <(redis_lab_auth_args)
  if ! timeout -k 2 60 ip netns exec "$RL_NS" redis-cli "${auth[@]}" --cluster create "${nodes[@]}" \
    --cluster-replicas "$replicas" --cluster-yes >"$RL_DIR/create.log" 2>&1; then
    echo "redis-cli --cluster create failed: $(tail -n 5 "$RL_DIR/create.log" | tr '\n' ' ')"
    return 1
  fi
  redis_lab_wait_ok 30
}

# Every live node: cluster_state:ok with all 16384 slots served; and the
# primaries the live nodes agree on are alive.
redis_lab_wait_ok() {
  local seconds="$1" deadline p info ok
  deadline=$((SECONDS + seconds))
  while :; do
    ok=1
    for p in $(redis_lab_alive); do
      info="$(redis_lab_cli "$p" CLUSTER INFO 2>/dev/null | tr -d '\r')"
      if ! grep -qx 'cluster_state:ok' <<<"$info" || ! grep -qx 'cluster_slots_ok:16384' <<<"$info"; then
        ok=0
        break
      fi
    done
    [ "$ok" = 1 ] && [ -n "$(redis_lab_alive)" ] && return 0
    if [ "$SECONDS" -ge "$deadline" ]; then
      echo "the Redis Cluster was not ok within ${seconds}s (last CLUSTER INFO of $p: $(grep -E 'cluster_state|slots_ok|slots_fail|known_nodes' <<<"$info" | tr '\n' ' '))"
      return 1
    fi
    sleep 0.1
  done
}

redis_lab_kill() {
  local port="$1" pid="${RL_PID[$1]:-}"
  [ -n "$pid" ] || return 0
  kill -KILL "$pid" 2>/dev/null
  { wait "$pid"; } 2>/dev/null
  [ -n "${SLT_TMP:-}" ] && rm -f "$SLT_TMP/pids/$pid"
  unset "RL_PID[$port]"
}

redis_lab_kill_all() {
  local p
  for p in "${RL_PORTS[@]}"; do redis_lab_kill "$p"; done
}

# CLUSTER NODES as a live node sees it: "port flags slot-ranges..." per line.
redis_lab_nodes() {
  local p
  for p in $(redis_lab_alive); do
    redis_lab_cli "$p" CLUSTER NODES 2>/dev/null | tr -d '\r' |
      awk '{ split($2, a, "[:@]"); printf "%s %s", a[2], $3; for (i = 9; i <= NF; i++) printf " %s", $i; print "" }'
    return 0
  done
}

redis_lab_primaries() {
  local alive
  alive=" $(redis_lab_alive) "
  redis_lab_nodes | awk -v alive="$alive" '$2 ~ /master/ && $2 !~ /fail/ && NF > 2 && index(alive, " " $1 " ") { print $1 }'
}

redis_lab_slot_owner() {
  local slot="$1" alive
  alive=" $(redis_lab_alive) "
  redis_lab_nodes | awk -v s="$slot" -v alive="$alive" '
    $2 ~ /master/ && $2 !~ /fail/ && index(alive, " " $1 " ") {
      for (i = 3; i <= NF; i++) {
        if ($i ~ /^\[/) continue   # a slot being migrated
        n = split($i, r, "-"); lo = r[1]; hi = (n > 1 ? r[2] : r[1])
        if (s + 0 >= lo + 0 && s + 0 <= hi + 0) { print $1; exit }
      }
    }'
}

redis_lab_keys() {
  local pattern="$1" p
  for p in $(redis_lab_primaries); do
    redis_lab_cli "$p" --scan --pattern "$pattern" 2>/dev/null | tr -d '\r' | awk -v p="$p" 'NF { print p, $0 }'
  done
}
