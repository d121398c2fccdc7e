#!/usr/bin/env bash
# sluiced's start-up failures: each one a one-line message on stderr and its
# own exit code (sluiced --help lists them), nothing left running. Needs root
# for the AF_PACKET cases, which run inside a network namespace of their own
# holding one veth pair (no traffic is sent).
#   tests/integration/cli.sh [BUILD_DIR]
set -uo pipefail
cd "$(dirname "$0")/../.."
build="${1:-build}"
sluiced="$build/src/sluiced"
[ -x "$sluiced" ] || { echo "cli.sh: $sluiced not built" >&2; exit 2; }

ns="slc-$$"
tmp="$(mktemp -d "/tmp/slc-$$.XXXXXX")"
cleanup() {
  if [ -n "${redis_pid:-}" ]; then kill -KILL "$redis_pid" 2>/dev/null; wait "$redis_pid" 2>/dev/null; fi
  if [ -n "${tls_pid:-}" ]; then kill -KILL "$tls_pid" 2>/dev/null; wait "$tls_pid" 2>/dev/null; fi
  ip netns pids "$ns" 2>/dev/null | xargs -r kill -KILL 2>/dev/null
  ip netns delete "$ns" 2>/dev/null
  umount "$tmp/huge" 2>/dev/null
  if [ -n "${hugepages_before:-}" ]; then echo "$hugepages_before" >/proc/sys/vm/nr_hugepages; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
failures=0

# expect NAME CODE PATTERN -- ARGS...: sluiced ARGS exits CODE and its stderr
# (one line) matches PATTERN.
expect() {
  local name="$1" code="$2" pattern="$3"
  shift 4
  local err rc
  err="$(timeout 60 "$@" 2>&1 >/dev/null)"
  rc=$?
  err="$(grep -v '^EAL:\|^TELEMETRY' <<<"$err")"
  if [ "$rc" -ne "$code" ]; then
    echo "FAIL $name: exit $rc, want $code; stderr: $err"
    failures=$((failures + 1))
  elif ! grep -qE -- "$pattern" <<<"$err"; then
    echo "FAIL $name: stderr '$err' does not match /$pattern/"
    failures=$((failures + 1))
  else
    echo "PASS $name ($rc: $(head -n 1 <<<"$err"))"
  fi
}

printf 'sluice: 1\nname: broken\nbuckets:\n  b: { rate: 10/fortnight }\nrules: []\n' >"$tmp/broken.yaml"
printf 'sluice: 1\nname: noports\nbuckets:\n  b: { rate: 10/min }\nrules:\n  - name: r\n    key: client_ip\n    bucket: b\n' >"$tmp/noports.yaml"

expect usage-no-config 2 '^sluiced: --config FILE is required' -- "$sluiced" --af-packet a:b
expect usage-unknown-option 2 "unknown option '--frobnicate'" -- "$sluiced" --config x --af-packet a:b --frobnicate
expect usage-both-modes 2 'exactly one of' -- "$sluiced" --config x --af-packet a:b --ports 0:1
expect usage-af-xdp-and-af-packet 2 'exactly one of' -- "$sluiced" --config x --af-packet a:b --af-xdp c:d
expect usage-af-xdp-pair 2 '--af-xdp wants CLIENT_IF:ORIGIN_IF' -- "$sluiced" --config x --af-xdp c
expect usage-log-level 2 '--log-level wants error, warning, notice, info or debug' -- "$sluiced" --config x --af-packet a:b --log-level loud
expect usage-refusal-log 2 '--refusal-log wants off or 0 to 10000' -- "$sluiced" --config x --af-packet a:b --refusal-log 20000
expect usage-option-twice 2 'workers' -- "$sluiced" --config x --af-packet a:b --workers 1 --workers 2
expect config-missing-file 3 "cannot read the policy file" -- "$sluiced" --config "$tmp/none.yaml" --af-packet a:b
expect config-broken-file 3 "broken.yaml:4:[0-9]+: " -- "$sluiced" --config "$tmp/broken.yaml" --af-packet a:b
expect check-config-broken 3 "broken.yaml:4:[0-9]+: " -- "$sluiced" --check-config "$tmp/broken.yaml"
expect config-no-service-ports 3 "no service ports" -- "$sluiced" --config "$tmp/noports.yaml" --af-packet a:b
# A cluster section's secret file is read before anything starts.
cluster_policy() {  # cluster_policy SECRET_FILE
  printf 'sluice: 1\nservice_ports: [80]\nbuckets:\n  b: { rate: 10/min, scope: cluster }\nrules:\n  - { name: r, key: client_ip, bucket: b }\ncluster:\n  redis: ["unix:%s/redis.sock"]\n  boxes: 2\n  secret_file: %s\n' "$tmp" "$1"
}
cluster_policy "$tmp/no.secret" >"$tmp/cluster-nosecret.yaml"
head -c 64 /dev/urandom >"$tmp/loose.secret" && chmod 0644 "$tmp/loose.secret"
cluster_policy "$tmp/loose.secret" >"$tmp/cluster-loose.yaml"
head -c 8 /dev/urandom >"$tmp/short.secret" && chmod 0600 "$tmp/short.secret"
cluster_policy "$tmp/short.secret" >"$tmp/cluster-short.yaml"
head -c 64 /dev/urandom >"$tmp/good.secret" && chmod 0600 "$tmp/good.secret"
cluster_policy "$tmp/good.secret" >"$tmp/cluster-good.yaml"
expect cluster-secret-missing 3 "cluster secret_file $tmp/no.secret: No such file" -- "$sluiced" --check-config "$tmp/cluster-nosecret.yaml"
expect cluster-secret-loose 3 "others may read or write it" -- "$sluiced" --check-config "$tmp/cluster-loose.yaml"
expect cluster-secret-short 3 "must hold 32 to 4096 bytes" -- "$sluiced" --config "$tmp/cluster-short.yaml" --af-packet a:b
expect cluster-check-ok 0 "" -- "$sluiced" --check-config "$tmp/cluster-good.yaml"

# Redis authentication: a redis-server of this test's own, on a unix socket
# in $tmp (no network), with requirepass (the default user) and an ACL user
# confined to sluice's key prefix. A password Redis refuses, or none where it
# wants one, stops sluiced at start with the reason (exit 9); an unreachable
# Redis only delays the sync. `--check-config --connect` tries it all.
redis_pid=""
if command -v redis-server >/dev/null; then
  printf 'port 0\nunixsocket %s/redis.sock\nunixsocketperm 700\nsave ""\nappendonly no\ndir %s\nrequirepass default-secret\nuser sluice on >sluice-secret ~sluice:* &* +@all -@dangerous +cluster|slots +info\n' \
    "$tmp" "$tmp" >"$tmp/redis.conf"
  redis-server "$tmp/redis.conf" >"$tmp/redis.log" 2>&1 &
  redis_pid=$!
  for _ in $(seq 50); do [ -S "$tmp/redis.sock" ] && break; sleep 0.1; done
fi
auth_policy() {  # auth_policy NAME ENDPOINT [USERNAME] PASSWORD_FILE
  local name="$1" endpoint="$2" user="" file
  [ $# -eq 4 ] && { user="$3"; shift; }
  file="$3"
  cluster_policy "$tmp/good.secret" | sed "s|unix:$tmp/redis.sock|$endpoint|" >"$tmp/$name.yaml"
  [ -n "$user" ] && printf '  username: %s\n' "$user" >>"$tmp/$name.yaml"
  [ -n "$file" ] && printf '  password_file: %s\n' "$file" >>"$tmp/$name.yaml"
  return 0
}
password() { printf '%s\n' "$2" >"$tmp/$1" && chmod 0600 "$tmp/$1"; }
password default.pw default-secret
password sluice.pw sluice-secret
password wrong.pw not-the-secret
password loose.pw default-secret && chmod 0644 "$tmp/loose.pw"
: >"$tmp/empty.pw" && chmod 0600 "$tmp/empty.pw"
auth_policy auth-default "unix:$tmp/redis.sock" "$tmp/default.pw"
auth_policy auth-acl "unix:$tmp/redis.sock" sluice "$tmp/sluice.pw"
auth_policy auth-wrong "unix:$tmp/redis.sock" "$tmp/wrong.pw"
auth_policy auth-wrong-user "unix:$tmp/redis.sock" nobody "$tmp/sluice.pw"
auth_policy auth-none "unix:$tmp/redis.sock" ""
auth_policy auth-loose "unix:$tmp/redis.sock" "$tmp/loose.pw"
auth_policy auth-empty "unix:$tmp/redis.sock" "$tmp/empty.pw"
auth_policy auth-relative "unix:$tmp/redis.sock" "secrets/redis.pw"
auth_policy auth-unreachable "unix:$tmp/no-redis.sock" "$tmp/default.pw"
auth_policy auth-in-endpoint "sluice:sluice-secret@198.18.0.9:6379" ""
if [ -n "$redis_pid" ] && [ -S "$tmp/redis.sock" ]; then
  expect redis-connect-default 0 "" -- "$sluiced" --check-config "$tmp/auth-default.yaml" --connect
  holds_out() {  # holds_out NAME PATTERN POLICY: --check-config --connect prints PATTERN
    if "$sluiced" --check-config "$tmp/$3.yaml" --connect 2>/dev/null | grep -q -- "$2"; then echo "PASS $1"; else echo "FAIL $1: no '$2'"; failures=$((failures + 1)); fi
  }
  holds_out redis-connect-default-said "cluster redis answered, authenticated as the default user" auth-default
  expect redis-connect-acl-user 0 "" -- "$sluiced" --check-config "$tmp/auth-acl.yaml" --connect
  holds_out redis-connect-acl-user-said "cluster redis answered, authenticated as sluice" auth-acl
  expect redis-connect-wrong-password 9 "authentication refused \(WRONGPASS" -- "$sluiced" --check-config "$tmp/auth-wrong.yaml" --connect
  expect redis-connect-unknown-user 9 "authentication refused \(WRONGPASS" -- "$sluiced" --check-config "$tmp/auth-wrong-user.yaml" --connect
  expect redis-connect-no-password 9 "NOAUTH" -- "$sluiced" --check-config "$tmp/auth-none.yaml" --connect
  expect redis-connect-unreachable 9 "no-redis.sock" -- "$sluiced" --check-config "$tmp/auth-unreachable.yaml" --connect
  expect redis-start-wrong-password 9 "^sluiced: cluster redis: .*authentication refused \(WRONGPASS" -- \
    "$sluiced" --config "$tmp/auth-wrong.yaml" --af-packet slc-nope0:slc-nope1
  expect redis-start-no-password 9 "NOAUTH.*\(the policy gives no password_file\)" -- \
    "$sluiced" --config "$tmp/auth-none.yaml" --af-packet slc-nope0:slc-nope1
  # Unreachable at start: said, and sluiced goes on (here to the missing interface).
  expect redis-start-unreachable 4 "interface 'slc-nope0' does not exist" -- \
    "$sluiced" --config "$tmp/auth-unreachable.yaml" --af-packet slc-nope0:slc-nope1
  # The password never shows: not in a refusal, not in the check's output.
  if "$sluiced" --check-config "$tmp/auth-wrong.yaml" --connect 2>&1 | grep -q not-the-secret; then
    echo "FAIL redis-password-not-shown: the password is in sluiced's output"; failures=$((failures + 1))
  else
    echo "PASS redis-password-not-shown"
  fi
else
  echo "FAIL redis-auth: redis-server did not start: $(tail -n 3 "$tmp/redis.log" 2>/dev/null)"
  failures=$((failures + 1))
fi
# TLS: a redis-server of this test's own with a TLS port on loopback and
# requirepass, its certificate made here; sluiced checks it against the CA
# and the name, and a certificate another CA signed stops it at start.
tls_pid=""
if command -v openssl >/dev/null && command -v redis-server >/dev/null; then
  (
    cd "$tmp" &&
      openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 -subj /CN=cli-ca &&
      openssl req -x509 -newkey rsa:2048 -nodes -keyout other.key -out other.crt -days 2 -subj /CN=other-ca &&
      openssl req -newkey rsa:2048 -nodes -keyout tls.key -out tls.csr -subj /CN=redis.test &&
      printf 'subjectAltName=DNS:redis.test,IP:127.0.0.1\n' >tls.ext &&
      openssl x509 -req -in tls.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out tls.crt -days 2 -extfile tls.ext
  ) >"$tmp/openssl.log" 2>&1
  tls_port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
  redis-server --port 0 --bind 127.0.0.1 --tls-port "$tls_port" --tls-cert-file "$tmp/tls.crt" --tls-key-file "$tmp/tls.key" \
    --tls-ca-cert-file "$tmp/ca.crt" --tls-auth-clients no --requirepass default-secret --save "" --appendonly no \
    --dir "$tmp" >"$tmp/redis-tls.log" 2>&1 &
  tls_pid=$!
  for _ in $(seq 50); do
    redis-cli --tls --cacert "$tmp/ca.crt" -h 127.0.0.1 -p "$tls_port" -a default-secret --no-auth-warning PING 2>/dev/null |
      grep -q PONG && break
    sleep 0.1
  done
  tls_policy() {  # tls_policy NAME CA [SERVER_NAME]
    auth_policy "$1" "127.0.0.1:$tls_port" "$tmp/default.pw"
    printf '  tls:\n    ca_file: %s\n' "$2" >>"$tmp/$1.yaml"
    [ $# -ge 3 ] && printf '    server_name: %s\n' "$3" >>"$tmp/$1.yaml"
    return 0
  }
  tls_policy tls-good "$tmp/ca.crt"
  tls_policy tls-named "$tmp/ca.crt" redis.test
  tls_policy tls-other-ca "$tmp/other.crt"
  tls_policy tls-wrong-name "$tmp/ca.crt" elsewhere.test
  tls_policy tls-no-ca "$tmp/none.crt"
  expect redis-tls-connect 0 "" -- "$sluiced" --check-config "$tmp/tls-good.yaml" --connect
  holds_out redis-tls-connect-said "cluster redis answered, over TLS, authenticated as the default user" tls-good
  expect redis-tls-server-name 0 "" -- "$sluiced" --check-config "$tmp/tls-named.yaml" --connect
  expect redis-tls-other-ca 9 "TLS handshake failed: the server's certificate: " -- \
    "$sluiced" --check-config "$tmp/tls-other-ca.yaml" --connect
  expect redis-tls-wrong-name 9 "TLS handshake failed: .*elsewhere.test" -- \
    "$sluiced" --check-config "$tmp/tls-wrong-name.yaml" --connect
  expect redis-tls-start-other-ca 9 "^sluiced: cluster redis: 127.0.0.1:$tls_port: TLS handshake failed" -- \
    "$sluiced" --config "$tmp/tls-other-ca.yaml" --af-packet slc-nope0:slc-nope1
  expect redis-tls-no-ca-file 3 "cluster tls ca_file $tmp/none.crt: cannot be loaded" -- \
    "$sluiced" --check-config "$tmp/tls-no-ca.yaml"
  # A client key is a secret: the password file's rules.
  cp "$tmp/tls.key" "$tmp/client.key" && chmod 0600 "$tmp/client.key"
  cp "$tmp/tls.key" "$tmp/loose.key" && chmod 0644 "$tmp/loose.key"
  for k in client loose; do
    cp "$tmp/tls-good.yaml" "$tmp/tls-$k-key.yaml"
    printf '    cert_file: %s\n    key_file: %s\n' "$tmp/tls.crt" "$tmp/$k.key" >>"$tmp/tls-$k-key.yaml"
  done
  expect redis-tls-client-key 0 "" -- "$sluiced" --check-config "$tmp/tls-client-key.yaml"
  expect redis-tls-loose-key 3 "cluster tls key_file $tmp/loose.key: others may read" -- \
    "$sluiced" --check-config "$tmp/tls-loose-key.yaml"
  kill -TERM "$tls_pid" 2>/dev/null
  wait "$tls_pid" 2>/dev/null
  tls_pid=""
else
  echo "FAIL redis-tls: openssl or redis-server missing"
  failures=$((failures + 1))
fi
expect redis-password-loose 3 "password_file $tmp/loose.pw: others may read" -- "$sluiced" --check-config "$tmp/auth-loose.yaml"
expect redis-password-empty 3 "password_file $tmp/empty.pw: must hold a password of 1 to 512 bytes" -- \
  "$sluiced" --check-config "$tmp/auth-empty.yaml"
expect redis-password-relative 3 "cluster password_file must be an absolute path" -- \
  "$sluiced" --check-config "$tmp/auth-relative.yaml"
expect redis-credentials-in-endpoint 3 "credentials do not go in the endpoint; give username and password_file" -- \
  "$sluiced" --check-config "$tmp/auth-in-endpoint.yaml"
if "$sluiced" --check-config "$tmp/auth-in-endpoint.yaml" 2>&1 | grep -q sluice-secret; then
  echo "FAIL redis-endpoint-password-not-shown: the password is in the error"; failures=$((failures + 1))
else
  echo "PASS redis-endpoint-password-not-shown"
fi
expect usage-connect-alone 2 "--connect goes with --check-config" -- "$sluiced" --config x --af-packet a:b --connect
if [ -n "$redis_pid" ]; then
  kill -TERM "$redis_pid" 2>/dev/null
  wait "$redis_pid" 2>/dev/null
  redis_pid=""
fi

expect interface-missing 4 "interface 'slc-nope0' does not exist" -- \
  "$sluiced" --config config/default.yaml --af-packet slc-nope0:slc-nope1

if [ "$(id -u)" -eq 0 ]; then
  ip netns add "$ns" && ip -n "$ns" link add a0 type veth peer name b0 && ip -n "$ns" link set a0 up && ip -n "$ns" link set b0 up
  # A veth has one queue: AF_XDP binds a socket to each worker's.
  expect af-xdp-queues 4 "interface 'a0' has 1 receive queue; --workers 2 needs one each" -- \
    ip netns exec "$ns" "$sluiced" --config config/default.yaml --af-xdp a0:b0 --state-dir "$tmp/state" --workers 2
  # GRO merges segments before a packet socket reads them; a merged one's
  # checksum is stale and the workers would drop it: refused at the start,
  # with the command that fixes it. (AF_XDP reads before GRO.)
  ip netns exec "$ns" ethtool -K b0 gro on >/dev/null 2>&1
  if ip netns exec "$ns" ethtool -k b0 2>/dev/null | grep -q '^generic-receive-offload: on'; then
    expect interface-gro-on 4 "interface 'b0' merges received segments \(generic-receive-offload on\).*ethtool -K b0 gro off" -- \
      ip netns exec "$ns" "$sluiced" --config config/default.yaml --af-packet a0:b0 --state-dir "$tmp/state"
    ip netns exec "$ns" ethtool -K b0 gro off >/dev/null 2>&1
  else
    echo "FAIL interface-gro-on: could not turn GRO on for a veth"
    failures=$((failures + 1))
  fi
  # 8 workers' packet buffers do not fit in 64 MB of DPDK memory.
  expect no-memory 5 "no memory for [0-9]+ packet buffers" -- \
    ip netns exec "$ns" "$sluiced" --config config/default.yaml --af-packet a0:b0 --state-dir "$tmp/state" --workers 8 --memory 64
  expect control-socket-unusable 7 "control socket" -- \
    ip netns exec "$ns" "$sluiced" --config config/default.yaml --af-packet a0:b0 --state-dir "$tmp/state" --control-socket /proc/sluice-nope/control.sock
  expect metrics-address-bad 7 "--metrics wants ADDR:PORT" -- \
    ip netns exec "$ns" "$sluiced" --config config/default.yaml --af-packet a0:b0 --state-dir "$tmp/state" --metrics nowhere \
    --control-socket "$tmp/m.sock"
  expect control-group-unknown 2 "no group named 'sluice-no-such-group'" -- \
    ip netns exec "$ns" "$sluiced" --config config/default.yaml --af-packet a0:b0 --state-dir "$tmp/state" --control-group sluice-no-such-group \
    --control-socket "$tmp/c.sock"
  : >"$tmp/not-a-dir"
  expect state-dir-not-a-directory 8 "--state-dir .*not-a-dir: .*not a directory" -- \
    ip netns exec "$ns" "$sluiced" --config config/default.yaml --af-packet a0:b0 --state-dir "$tmp/not-a-dir"
  mkdir -m 755 "$tmp/open"
  expect state-dir-open-to-others 8 "--state-dir .*open: .*has mode 0755; it must be 0700 \\(chmod 700 " -- \
    ip netns exec "$ns" "$sluiced" --config config/default.yaml --af-packet a0:b0 --state-dir "$tmp/open"
  mkdir -m 700 "$tmp/loose"
  head -c 192 /dev/urandom >"$tmp/loose/credential.secret"
  chmod 644 "$tmp/loose/credential.secret"
  expect state-secret-readable-by-others 8 "credential.secret.*chmod 600" -- \
    ip netns exec "$ns" "$sluiced" --config config/default.yaml --af-packet a0:b0 --state-dir "$tmp/loose"
  mkdir -m 700 "$tmp/short"
  head -c 100 /dev/urandom >"$tmp/short/credential.secret"
  chmod 600 "$tmp/short/credential.secret"
  expect state-secret-wrong-size 8 "credential.secret.*100" -- \
    ip netns exec "$ns" "$sluiced" --config config/default.yaml --af-packet a0:b0 --state-dir "$tmp/short"
  mkdir -m 700 "$tmp/v2"
  printf '# sluice runs journal v2\n' >"$tmp/v2/runs.journal"
  expect state-journal-unknown-version 8 "runs.journal" -- \
    ip netns exec "$ns" "$sluiced" --config config/default.yaml --af-packet a0:b0 --state-dir "$tmp/v2"
  # A broken policy is reported before the state directory is touched.
  expect config-before-state 3 "broken.yaml:4:[0-9]+: " -- \
    ip netns exec "$ns" "$sluiced" --config "$tmp/broken.yaml" --af-packet a0:b0 --state-dir "$tmp/untouched"
  if [ -e "$tmp/untouched" ]; then echo "FAIL config-before-state: the state directory was created"; failures=$((failures + 1)); fi
  # The tables on huge pages (--table-dir on a hugetlbfs mount): made in
  # huge-page units, mapped, written back by nobody, re-attached by the next
  # start. The pages reserved here are given back after.
  hugepages_before="$(cat /proc/sys/vm/nr_hugepages)"
  mkdir -p "$tmp/huge"
  if echo $((hugepages_before + 96)) >/proc/sys/vm/nr_hugepages &&
    [ "$(cat /proc/sys/vm/nr_hugepages)" -ge $((hugepages_before + 96)) ] &&
    mount -t hugetlbfs -o pagesize=2M,mode=0700 none "$tmp/huge" 2>/dev/null; then
    huge_start() {
      ip netns exec "$ns" timeout -k 2 30 "$sluiced" --config config/default.yaml --af-packet a0:b0 \
        --state-dir "$tmp/huge-state" --table-dir "$tmp/huge" --buckets 65536 --flows 4096 --contexts 64 \
        --control-socket "$tmp/huge.sock" >"$tmp/huge-$1.out" 2>&1 &
      huge_pid=$!
      for ((i = 0; i < 100; i++)); do
        grep -q '^sluiced: ready' "$tmp/huge-$1.out" 2>/dev/null && return 0
        kill -0 "$huge_pid" 2>/dev/null || return 1
        sleep 0.1
      done
      return 1
    }
    huge_stop() {
      kill -TERM "$huge_pid" 2>/dev/null
      wait "$huge_pid"
    }
    why=""
    if ! huge_start first; then
      why="did not start: $(grep -v '^EAL:\|^TELEMETRY' "$tmp/huge-first.out" | tail -n 3 | tr '\n' ' ')"
    elif ! grep -q "^  tables: $tmp/huge, on hugetlbfs (2048 kB pages)\$" "$tmp/huge-first.out"; then
      why="the start-up summary does not say the tables are on hugetlbfs: $(grep '^  tables:' "$tmp/huge-first.out")"
    else
      for f in buckets.table credential-slots.table flows.table; do
        size="$(stat -c %s "$tmp/huge/$f" 2>/dev/null || echo 0)"
        if [ "$size" -eq 0 ] || [ $((size % 2097152)) -ne 0 ]; then why="$why $f is $size bytes (not whole huge pages);"; fi
      done
    fi
    if [ -z "$why" ]; then
      # Two processes never map the same tables: another state directory,
      # the same table directory, is refused.
      expect table-dir-in-use 8 "--table-dir: .*/huge is in use by another sluiced" -- \
        ip netns exec "$ns" "$sluiced" --config config/default.yaml --af-packet a0:b0 --state-dir "$tmp/huge-other" \
        --table-dir "$tmp/huge" --control-socket "$tmp/huge-other.sock"
    fi
    if [ -n "$huge_pid" ] && kill -0 "$huge_pid" 2>/dev/null; then huge_stop || why="$why the first stopped with status $?;"; fi
    if [ -z "$why" ]; then
      if ! huge_start again; then
        why="did not start again: $(grep -v '^EAL:\|^TELEMETRY' "$tmp/huge-again.out" | tail -n 3 | tr '\n' ' ')"
      elif ! grep -q "re-attached [0-9]* buckets from $tmp/huge/buckets.table (generation 2)" "$tmp/huge-again.out" ||
        ! grep -q "from $tmp/huge/flows.table (generation 2)" "$tmp/huge-again.out"; then
        why="the second start did not re-attach the tables on hugetlbfs: $(grep -E 're-attached|carried on|set aside' "$tmp/huge-again.out" | tr '\n' ' ')"
      fi
      kill -0 "$huge_pid" 2>/dev/null && { huge_stop || why="$why the second stopped with status $?;"; }
    fi
    if [ -z "$why" ]; then echo "PASS table-dir-hugetlbfs"; else echo "FAIL table-dir-hugetlbfs: $why"; failures=$((failures + 1)); fi
    umount "$tmp/huge"
  else
    echo "SKIP table-dir-hugetlbfs (no huge pages could be reserved, or no hugetlbfs)"
  fi
  echo "$hugepages_before" >/proc/sys/vm/nr_hugepages
  leftover="$(ip netns pids "$ns" 2>/dev/null)"
  if [ -n "$leftover" ]; then echo "FAIL no-memory: processes left behind: $leftover"; failures=$((failures + 1)); fi
else
  echo "SKIP no-memory (needs root)"
fi

# The ones that succeed.
if "$sluiced" --help | grep -q '^Exit codes:'; then echo "PASS help"; else echo "FAIL help"; failures=$((failures + 1)); fi
if "$sluiced" --version | grep -qE '^sluiced [0-9]+\.[0-9]+\.[0-9]+$'; then echo "PASS version"; else echo "FAIL version"; failures=$((failures + 1)); fi
for p in config/*.yaml; do
  if "$sluiced" --check-config "$p" | grep -q ': ok: policy'; then echo "PASS check-config $p"
  else echo "FAIL check-config $p"; failures=$((failures + 1)); fi
done

# sluicectl's usage errors: exit 2 and one line, before any socket is opened
# (the socket given does not exist: reaching for it would be exit 3).
sluicectl="$build/src/sluicectl"
ctl_expect() {  # ctl_expect NAME CODE PATTERN -- ARGS...
  local name="$1" code="$2" pattern="$3"
  shift 4
  local err rc
  err="$("$sluicectl" --socket "$tmp/none.sock" "$@" 2>&1 >/dev/null </dev/null)"
  rc=$?
  if [ "$rc" -ne "$code" ]; then echo "FAIL sluicectl $name: exit $rc, want $code; stderr: $err"; failures=$((failures + 1))
  elif [ "$(wc -l <<<"$err")" -ne 1 ] || ! grep -qE -- "$pattern" <<<"$err"; then
    echo "FAIL sluicectl $name: stderr '$err' is not one line matching /$pattern/"; failures=$((failures + 1))
  else echo "PASS sluicectl $name ($rc: $err)"; fi
}
ctl_expect no-command 2 "which command" --
ctl_expect unknown-command 2 "unknown command 'frobnicate'" -- frobnicate
ctl_expect run-what 2 "run what\? \(start, end\)" -- run
ctl_expect run-start-no-token 2 "'run start' takes TOKEN" -- run start
ctl_expect run-start-bad-budget 2 "--budget wants requests per minute" -- run start tok --budget lots
ctl_expect run-end-extra 2 "'run end' takes TOKEN, got 'extra'" -- run end tok extra
ctl_expect status-extra 2 "'status' takes no arguments, got 'x'" -- status x
ctl_expect unknown-option 2 "unknown option '--frob'" -- --frob
ctl_expect socket-empty 2 "--socket needs" -- --socket= status
ctl_expect option-of-another-command 2 "'runs' has no option --budget" -- runs --budget 5
ctl_expect credential-hash-empty 2 "reads the credential on stdin" -- credential hash
ctl_expect usage-report-tokens 2 "TOKENS wants a whole number" -- usage report dep ten
ctl_expect bucket-show-args 2 "'bucket show' takes BUCKET KEY" -- bucket show onlyone
ctl_expect top-count 2 "--count wants refreshes" -- top --count 0
ctl_expect credentials-load-missing 2 "cannot read $tmp/nothing.txt" -- credentials load "$tmp/nothing.txt"
ctl_expect policy-check-a-directory 2 "cannot read $tmp: not a regular file" -- policy check "$tmp"
ctl_expect no-daemon 3 "sluiced is not running" -- status
# sluicectl opens a file with its caller's rights (sluiced opens
# no path a client names), so a user who cannot read a file cannot have
# sluiced read it either.
if [ "$(id -u)" -eq 0 ]; then
  err="$(setpriv --reuid=65534 --regid=65534 --clear-groups "$sluicectl" --socket "$tmp/none.sock" policy check /etc/shadow 2>&1)"
  rc=$?
  if [ "$rc" -eq 2 ] && grep -q "cannot read /etc/shadow: Permission denied" <<<"$err"; then
    echo "PASS sluicectl a file its user cannot read ($rc: $err)"
  else echo "FAIL sluicectl a file its user cannot read: exit $rc: $err"; failures=$((failures + 1)); fi
fi
# A group's help lists its commands with their arguments.
if "$sluicectl" run --help | grep -q '^  run start TOKEN \[--budget N\]$'; then echo "PASS sluicectl run --help"
else echo "FAIL sluicectl run --help"; failures=$((failures + 1)); fi
missing=0
for c in status stats top runs "run start" "run end" "credentials load" "credentials show" "credential add" \
  "credential remove" "credential hash" "usage report" "bucket show" "policy show" "policy check" "policy reload"; do
  # shellcheck disable=SC2086  # the command's words
  if "$sluicectl" --help | grep -q "^  $c\b" && "$sluicectl" $c --help | grep -q "^sluicectl $c"; then :
  else echo "FAIL sluicectl --help: '$c' missing"; failures=$((failures + 1)); missing=1; fi
done
[ "$missing" = 0 ] && echo "PASS sluicectl --help lists every command and each has its own"

# sluicectl's bash completion offers its commands.
completes() {  # completes WANT WORD... : completing after WORDs offers WANT
  local want="$1"
  shift
  local got
  got="$(bash -c '. src/sluicectl.bash-completion; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _sluicectl; echo "${COMPREPLY[*]}"' _ "$@")"
  if [ "$got" = "$want" ]; then echo "PASS completion '$*'"; else echo "FAIL completion '$*': got '$got', want '$want'"; failures=$((failures + 1)); fi
}
completes "status stats top runs run credentials credential usage bucket policy" sluicectl ""
completes "show check reload" sluicectl --json policy ""
completes "status stats" sluicectl --socket /x st
completes "start end" sluicectl run ""
completes "add remove hash" sluicectl credential ""
completes "load show" sluicectl credentials ""
completes "--budget" sluicectl run start tok --b

[ "$failures" -eq 0 ] && echo "cli: all passed" || echo "cli: $failures failed"
[ "$failures" -eq 0 ]
