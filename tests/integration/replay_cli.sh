#!/usr/bin/env bash
# sluice-replay's bad input end to end: a bad command line, a
# policy that does not load, an input that cannot be read, a state directory
# that cannot be used, each a message and its own exit code (--help lists
# them); broken log lines, a truncated capture and damaged blocks reported
# by FILE:LINE:COLUMN or packet/byte, skipped and counted, never a crash;
# hostile text never reaching the terminal raw. No root, no network: the
# inputs are written here (python3's standard library) into a temporary
# directory that is removed on exit.
#   tests/integration/replay_cli.sh [BUILD_DIR]
# shellcheck disable=SC2016  # '$remote_addr' and the like: nginx's variables
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
build="${1:-build}"
replay="$build/src/sluice-replay"
[ -x "$replay" ] || { echo "replay_cli.sh: $replay not built" >&2; exit 2; }

tmp="$(mktemp -d "/tmp/slrc-$$.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
# The label secret (credential digests without --state-dir) is made under
# here, not in the home directory.
export XDG_STATE_HOME="$tmp/xdg"
policy=config/three-budgets.yaml
failures=0

fail() { echo "FAIL $1: $2"; failures=$((failures + 1)); }

# run COMMAND...: stdout in $tmp/out, stderr in $tmp/err, the exit status
# in $rc. Bounded: a hang is exit 124, a crash 128+signal.
run() {
  timeout 60 "$@" >"$tmp/out" 2>"$tmp/err"
  rc=$?
}

# expect NAME CODE PATTERN -- COMMAND...: COMMAND (sluice-replay and its
# arguments) exits CODE and its stderr matches PATTERN (extended regex; ''
# for any). A usage error (2) and an unwritable report (1) are one line;
# any other failure ends with sluice-replay's own line, after the lines that
# say where. $tmp/out and $tmp/err stay for the checks that follow.
expect() {
  local name="$1" code="$2" pattern="$3"
  shift 4
  run "$@"
  local err lines
  err="$(cat "$tmp/err")"
  lines="$(grep -c '' "$tmp/err")"
  if [ "$rc" -ne "$code" ]; then
    fail "$name" "exit $rc, want $code; stderr: $(head -c 600 "$tmp/err")"
  elif [ -n "$pattern" ] && ! grep -qE -- "$pattern" "$tmp/err"; then
    fail "$name" "stderr '$err' does not match /$pattern/"
  elif { [ "$code" -eq 1 ] || [ "$code" -eq 2 ]; } && [ "$lines" -ne 1 ]; then
    fail "$name" "stderr is $lines lines, want one: $err"
  elif [ "$code" -ne 0 ] && ! tail -n 1 "$tmp/err" | grep -q '^sluice-replay: '; then
    fail "$name" "stderr does not end with sluice-replay's own line: $err"
  else
    echo "PASS $name ($rc: $(tail -n 1 "$tmp/err"))"
  fi
}

# check NAME GOT WANT: one value the last run gave, against the one wanted.
check() {
  if [ "$2" = "$3" ]; then echo "PASS $1 ($2)"; else fail "$1" "got '$2', want '$3'"; fi
}

# holds NAME WHY COMMAND...: COMMAND succeeds; else WHY is the failure.
holds() {
  local name="$1" why="$2"
  shift 2
  if "$@"; then echo "PASS $name"; else fail "$name" "$why"; fi
}

# report EXPR: a Python expression over the last run's JSON report `d`.
report() {
  python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$tmp/out" "$1" 2>&1
}

# printable FILE: every byte a printable ASCII character or a line end (no
# ESC, no other C0 or C1 control, no DEL): what a terminal shows as text.
printable() { ! LC_ALL=C grep -q '[^[:print:]]' "$1"; }

# ---- the inputs ---------------------------------------------------------------

printf 'sluice: 1\nname: broken\nbuckets:\n  b: { rate: 10/fortnight }\nrules: []\n' >"$tmp/broken.yaml"
head -c 5000 /dev/urandom >"$tmp/random.bin"
mkdir "$tmp/adir" "$tmp/policy-dir"
# State directories: one without a secret, one with a good one, one whose
# secret is short, one whose runs journal is of an unknown version.
mkdir -m 700 "$tmp/nosecret" "$tmp/state" "$tmp/shortsecret" "$tmp/v2"
head -c 192 /dev/urandom >"$tmp/state/credential.secret"
head -c 100 /dev/urandom >"$tmp/shortsecret/credential.secret"
cp "$tmp/state/credential.secret" "$tmp/v2/"
chmod 600 "$tmp"/*/credential.secret
printf '# sluice runs journal v2\n' >"$tmp/v2/runs.journal"
printf 'good-run 10\nbad/token 5\n' >"$tmp/runs-token"
printf 'good-run 12x\n' >"$tmp/runs-budget"
printf 'nothex alice\n' >"$tmp/credentials"

# An nginx combined log: lines 1, 2, 4, 7 good; 3 cut short, 5 a bad
# address, 6 a bad time.
line() { printf '%s - - [10/Oct/2024:13:55:%s +0000] "GET %s HTTP/1.1" 200 12 "-" "curl/8.0"\n' "$@"; }
{
  line 198.18.0.7 36 /v1/a
  line 198.18.0.7 37 /v1/b
  printf '198.18.0.7 - - [10/Oct/2024:13:55:3\n'
  line 198.18.0.8 38 /v1/c
  line 198.18.0.999 39 /v1/d
  printf '198.18.0.7 - - [10/Foo/2024:13:55:40 +0000] "GET /v1/e HTTP/1.1" 200 12 "-" "curl/8.0"\n'
  line 198.18.0.8 41 /v1/f
} >"$tmp/mixed.log"

python3 - "$tmp" <<'PY' || { echo "replay_cli.sh: cannot write the inputs" >&2; exit 2; }
import random, struct, sys
out = sys.argv[1]

# One TCP connection, Ethernet/IPv4 (checksums zero): the handshake, a GET
# head, the origin's ACK, a second GET head: six packets.
def frame(src, dst, sport, dport, seq, ack, flags, payload=b''):
    tcp = struct.pack('!HHIIBBHHH', sport, dport, seq, ack, 5 << 4, flags, 65535, 0, 0) + payload
    ip = struct.pack('!BBHHHBBH4s4s', 0x45, 0, 20 + len(tcp), 1, 0x4000, 64, 6, 0,
                     bytes(map(int, src.split('.'))), bytes(map(int, dst.split('.'))))
    return b'\x02\0\0\0\0\x02' + b'\x02\0\0\0\0\x01' + b'\x08\x00' + ip + tcp

C, S, CP = '198.18.0.7', '198.18.0.20', 40000
SYN, ACK, PSH = 0x02, 0x10, 0x08
get1 = b'GET /v1/one HTTP/1.1\r\nHost: 198.18.0.20\r\n\r\n'
get2 = b'GET /v1/two HTTP/1.1\r\nHost: 198.18.0.20\r\n\r\n'
cs, ss = 1000, 5000
packets = [
    frame(C, S, CP, 80, cs, 0, SYN),
    frame(S, C, 80, CP, ss, cs + 1, SYN | ACK),
    frame(C, S, CP, 80, cs + 1, ss + 1, ACK),
    frame(C, S, CP, 80, cs + 1, ss + 1, PSH | ACK, get1),
    frame(S, C, 80, CP, ss + 1, cs + 1 + len(get1), ACK),
    frame(C, S, CP, 80, cs + 1 + len(get1), ss + 1, PSH | ACK, get2),
]
t0 = 1700000000

pcap = struct.pack('<IHHiIII', 0xa1b2c3d4, 2, 4, 0, 0, 65535, 1)
for i, p in enumerate(packets):
    pcap += struct.pack('<IIII', t0, 1000 * (i + 1), len(p), len(p)) + p
open(out + '/whole.pcap', 'wb').write(pcap)
open(out + '/cut.pcap', 'wb').write(pcap[:len(pcap) - len(packets[-1]) // 2])

def block(kind, body):
    body += b'\0' * (-len(body) % 4)
    return struct.pack('<II', kind, 12 + len(body)) + body + struct.pack('<I', 12 + len(body))

def pcapng(bad_block=None):
    ng = block(0x0a0d0d0a, struct.pack('<IHHq', 0x1a2b3c4d, 1, 0, -1))
    ng += block(1, struct.pack('<HHI', 1, 0, 65535))
    for i, p in enumerate(packets):
        us = t0 * 1000000 + 1000 * (i + 1)
        b = block(6, struct.pack('<IIIII', 0, us >> 32, us & 0xffffffff, len(p), len(p)) + p)
        if i == bad_block:
            b = b[:4] + struct.pack('<I', 13) + b[8:]  # not a multiple of 4
        ng += b
    return ng
open(out + '/whole.pcapng', 'wb').write(pcapng())
open(out + '/badblock.pcapng', 'wb').write(pcapng(bad_block=4))

# Keep-alive traffic captured split by direction (tcpdump -Q in / -Q out):
# three connections from one client, 40 GETs each (more than the 32
# unanswered requests the appliance lets through), each answered 200, 1 ms
# apart. The bare budget (60 a minute) refuses about half. Written whole
# and as one file per direction.
def pcap_of(frames):
    b = struct.pack('<IHHiIII', 0xa1b2c3d4, 2, 4, 0, 0, 65535, 1)
    for us, p in frames:
        b += struct.pack('<IIII', t0 + us // 1000000, us % 1000000, len(p), len(p)) + p
    return b
ok = b'HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok'
sent = []  # (from the client, frame)
conns = [[CP + i, 1000 * (i + 1), 500000 * (i + 1)] for i in range(3)]  # port, client seq, origin seq
for port, c, o in conns:
    sent += [(True, frame(C, S, port, 80, c, 0, SYN)), (False, frame(S, C, 80, port, o, c + 1, SYN | ACK)),
             (True, frame(C, S, port, 80, c + 1, o + 1, ACK))]
for k in conns:
    k[1] += 1
    k[2] += 1
for n in range(40):
    for i, k in enumerate(conns):
        req = b'GET /v1/c%d/%d HTTP/1.1\r\nHost: 198.18.0.20\r\n\r\n' % (i, n)
        sent.append((True, frame(C, S, k[0], 80, k[1], k[2], PSH | ACK, req)))
        k[1] += len(req)
        sent.append((False, frame(S, C, 80, k[0], k[2], k[1], PSH | ACK, ok)))
        k[2] += len(ok)
timed = [(1000 * i, side, f) for i, (side, f) in enumerate(sent)]
open(out + '/keepalive.pcap', 'wb').write(pcap_of([(us, f) for us, _, f in timed]))
open(out + '/keepalive-in.pcap', 'wb').write(pcap_of([(us, f) for us, side, f in timed if side]))
open(out + '/keepalive-out.pcap', 'wb').write(pcap_of([(us, f) for us, side, f in timed if not side]))

# Damaged captures: bytes overwritten at random, random records after a
# good header (a fixed seed: the same files every run).
r = random.Random(19)
for i in range(3):
    w = bytearray(pcap)
    for _ in range(20):
        w[r.randrange(24, len(w))] = r.randrange(256)
    open(f'{out}/damaged{i}.pcap', 'wb').write(bytes(w))
    open(f'{out}/noise{i}.pcap', 'wb').write(pcap[:24] + bytes(r.randrange(256) for _ in range(4000)))
    open(f'{out}/noise{i}.pcapng', 'wb').write(pcapng()[:60] + bytes(r.randrange(256) for _ in range(4000)))

# 100 000 lines of garbage bytes (1 to 59 each, no line end): about 3 MB.
with open(out + '/garbage.log', 'wb') as f:
    f.write(b''.join(r.randbytes(r.randrange(1, 60)).replace(b'\n', b'\0') + b'\n' for _ in range(100000)))

# Hostile text, nginx: ESC raw and as nginx writes it (\x1B) in the request
# target, in the request line, in the address; a C1 CSI (U+009B) too.
L = '198.18.0.7 - - [10/Oct/2024:13:56:%02d +0000] "%s" 200 1 "-" "curl/8.0"\n'
hostile = [
    L % (1, 'GET /v1/\x1b[31mred\x1b[0m HTTP/1.1'),
    L % (2, 'GET /v1/\\x1B]0;title\\x07 HTTP/1.1'),
    L % (3, 'GET /vrx/\\x1B[2J/v1/x HTTP/1.1'),
    L % (4, '\x1b[2J'),
    L % (5, '\\x1B[2J\\x1B[H'),
    L % (6, 'GET /\\xC2\\x9B31m HTTP/1.1'),
    '198.18.0.7\x1b[31m - - [10/Oct/2024:13:56:07 +0000] "GET / HTTP/1.1" 200 1 "-" "x"\n',
    '198.18.0.7 - - [10/Oct/2024:13:56:08 +0000] "GET /\x1b[2J HTTP/1.1" 200 1 "-" "x\x1b[31m"\n',
]
open(out + '/hostile.log', 'wb').write(''.join(hostile).encode())

# A key (deployment-quotas' X-Pi-Deployment) holding a C1 CSI and a
# right-to-left override: 700 requests in a minute of 600, so it is refused
# and listed.
with open(out + '/hostile-key.log', 'wb') as f:
    for i in range(700):
        f.write(b'198.18.0.7 [10/Oct/2024:13:55:%02d +0000] "POST /v1/chat HTTP/1.1" '
                b'"evil\\xC2\\x9B31m\\xE2\\x80\\xAEx"\n' % (i % 50))
    f.write(b'198.18.0.7 [10/Oct/2024:13:55:51 +0000] "POST /v1/chat HTTP/1.1" "a\\x1B[31m"\n')

# Hostile text, JSON lines: ESC escaped and raw (which JSON forbids), a C1
# CSI as UTF-8 and as a lone byte, DEL, in values and keys, broken lines.
J = '{"remote_addr":"198.18.0.7","msec":"1700000000.%03d","request":%s}\n'
with open(out + '/hostile.json', 'wb') as f:
    f.write((J % (1, '"GET /v1/\\u001b[31mx HTTP/1.1"')).encode())
    f.write((J % (2, '"GET /v1/\x1b[31mx HTTP/1.1"')).encode())
    f.write(b'{"remote_addr":"198.18.0.7","msec":"1700000000.003","request":"GET /\xc2\x9b31mred HTTP/1.1\n')
    f.write(b'{"remote_addr":"198.18.0.7","msec":"1700000000.004","request":"GET /\x9b31mred HTTP/1.1"}\n')
    f.write(b'{"remote_addr":"198.18.0.7","msec":"1700000000.005","request":"GET /\x7f[31mred HTTP/1.1\n')
    f.write(b'{"remote_addr":"198.18.0.7\\u001b[2J","msec":"1700000000.006","request":"GET / HTTP/1.1"}\n')
    f.write(b'{"\x1b[2J":1}\n')
    f.write(b'{"remote_addr":"198.18.0.7","msec":"1700000000.008"}\x1b[2J\n')
PY

# ---- 2: the command line ------------------------------------------------------------

expect usage-no-policy 2 '^sluice-replay: --policy FILE is required' -- "$replay" "$tmp/mixed.log"
expect usage-no-input 2 '^sluice-replay: name at least one INPUT' -- "$replay" --policy "$policy"
expect usage-format-xml 2 "--format +wants auto, pcap, nginx or json, got 'xml'" -- \
  "$replay" --policy "$policy" --format xml "$tmp/mixed.log"
expect usage-log-format-no-time 2 '--log-format .*not usable: 1:[0-9]+: no time' -- \
  "$replay" --policy "$policy" --log-format '$remote_addr $request' "$tmp/mixed.log"
expect usage-log-format-column 2 '--log-format .*not usable: 1:39: unterminated "\$\{"' -- \
  "$replay" --policy "$policy" --log-format '$remote_addr [$time_local] "$request" ${http_x' "$tmp/mixed.log"
expect usage-credentials-without-state-dir 2 '--credentials needs --state-dir' -- \
  "$replay" --policy "$policy" --credentials "$tmp/credentials" "$tmp/mixed.log"
expect usage-top-zero 2 "--top +wants 1 to 10000, got '0'" -- "$replay" --policy "$policy" --top 0 "$tmp/mixed.log"
expect usage-top-without-value 2 '--top needs a value' -- "$replay" --policy "$policy" "$tmp/mixed.log" --top
expect usage-threads-zero 2 "--threads +wants 1 to 1024, got '0'" -- \
  "$replay" --policy "$policy" --threads 0 "$tmp/mixed.log"
expect usage-service-port-zero 2 "--service-ports +wants ports 1 to 65535.*got '80,0'" -- \
  "$replay" --policy "$policy" --service-ports 80,0 "$tmp/mixed.log"
expect usage-unknown-option 2 "--frobnicate" -- "$replay" --policy "$policy" --frobnicate "$tmp/mixed.log"
expect usage-json-field-no-key 2 "--json-field +wants KEY=VARIABLE, got 'nokey'" -- \
  "$replay" --policy "$policy" --json-field nokey "$tmp/mixed.log"
expect usage-policy-twice 2 '--policy' -- "$replay" --policy "$policy" --policy "$policy" "$tmp/mixed.log"

# ---- 3: the policies ------------------------------------------------------------------

expect policy-missing 3 "none.yaml: cannot read the policy file: No such file" -- \
  "$replay" --policy "$tmp/none.yaml" "$tmp/mixed.log"
expect policy-broken 3 "^$tmp/broken.yaml:4:[0-9]+: bucket b: rate" -- \
  "$replay" --policy "$tmp/broken.yaml" "$tmp/mixed.log"
check policy-broken-says-which "$(tail -n 1 "$tmp/err")" "sluice-replay: the policy $tmp/broken.yaml is not usable"
expect policy-a-directory 3 "^$tmp/policy-dir: " -- "$replay" --policy "$tmp/policy-dir" "$tmp/mixed.log"
expect compare-broken 3 "^$tmp/broken.yaml:4:[0-9]+: bucket b: rate" -- \
  "$replay" --policy "$policy" --compare "$tmp/broken.yaml" "$tmp/mixed.log"
check compare-broken-says-which "$(tail -n 1 "$tmp/err")" "sluice-replay: the policy $tmp/broken.yaml is not usable"
check compare-broken-nothing-replayed "$(wc -c <"$tmp/out")" 0

# ---- 4: inputs that cannot be read at all: nothing replayed ----------------------------

expect input-missing 4 "none.log: cannot open: No such file" -- "$replay" --policy "$policy" "$tmp/none.log"
expect input-random-as-pcap 4 "random.bin: not a pcap or pcapng capture" -- \
  "$replay" --policy "$policy" --format pcap "$tmp/random.bin"
expect input-directory 4 "adir: .*(Is a directory|not a regular file)" -- "$replay" --policy "$policy" "$tmp/adir"
head -c 10 "$tmp/whole.pcap" >"$tmp/header.pcap"
expect input-pcap-header-cut 4 "header.pcap: byte 0: the pcap file header is cut short" -- \
  "$replay" --policy "$policy" "$tmp/header.pcap"
expect input-one-of-two-missing 4 "none.log: cannot open" -- \
  "$replay" --policy "$policy" "$tmp/mixed.log" "$tmp/none.log"
check input-one-of-two-missing-nothing-replayed "$(wc -c <"$tmp/out")" 0

# ---- 5: what the box knew --------------------------------------------------------------

expect state-dir-missing 5 "cannot open the secret $tmp/nostate/credential.secret: No such file" -- \
  "$replay" --policy "$policy" --state-dir "$tmp/nostate" "$tmp/mixed.log"
expect state-dir-no-secret 5 "cannot open the secret $tmp/nosecret/credential.secret: No such file" -- \
  "$replay" --policy "$policy" --state-dir "$tmp/nosecret" "$tmp/mixed.log"
expect state-secret-short 5 "shortsecret/credential.secret holds 100 bytes, not 192" -- \
  "$replay" --policy "$policy" --state-dir "$tmp/shortsecret" "$tmp/mixed.log"
expect state-journal-version 5 "v2/runs.journal" -- "$replay" --policy "$policy" --state-dir "$tmp/v2" "$tmp/mixed.log"
expect runs-bad-token 5 "^$tmp/runs-token:2:1: a run token" -- \
  "$replay" --policy "$policy" --runs "$tmp/runs-token" "$tmp/mixed.log"
expect runs-bad-budget 5 "^$tmp/runs-budget:1:10: a budget" -- \
  "$replay" --policy "$policy" --runs "$tmp/runs-budget" "$tmp/mixed.log"
expect runs-missing 5 "none.runs" -- "$replay" --policy "$policy" --runs "$tmp/none.runs" "$tmp/mixed.log"
expect credentials-bad-hash 5 "^$tmp/credentials:1:1: not a credential hash" -- \
  "$replay" --policy "$policy" --state-dir "$tmp/state" --credentials "$tmp/credentials" "$tmp/mixed.log"
before="$(ls -lA --full-time "$tmp/state")"
expect state-dir-good 0 '' -- "$replay" --policy "$policy" --state-dir "$tmp/state" -q "$tmp/mixed.log"
if [ "$(ls -lA --full-time "$tmp/state")" = "$before" ]; then echo "PASS state-dir-never-written"
else fail state-dir-never-written "$(ls -lA --full-time "$tmp/state")"; fi

# ---- skipped records: broken log lines ------------------------------------------------

log="$tmp/mixed.log"
expect log-problems 0 "^$log:3:17: does not match the log format" -- "$replay" --policy "$policy" "$log"
check log-problems-where "$(cut -d' ' -f1 "$tmp/err" | tr '\n' ' ')" "$log:3:17: $log:5:1: $log:6:17: "
holds log-problems-why-address "$(cat "$tmp/err")" \
  grep -q "^$log:5:1: the client address is not an IP address: \"198.18.0.999\"$" "$tmp/err"
holds log-problems-why-time "$(cat "$tmp/err")" grep -q "^$log:6:17: not a time: " "$tmp/err"
check log-problems-summary "$(head -n 1 "$tmp/out")" "input $log (nginx): 7 lines, 4 requests, 3 problems"
expect log-problems-json 0 "^$log:3:17: " -- "$replay" --policy "$policy" --json "$log"
check log-problems-json-counts "$(report '(d["records"], d["inputs"][0]["records"], d["inputs"][0]["problems"], d["inputs"][0]["units_read"], d["policy"]["admitted"])')" "(4, 4, 3, 7, 4)"
check log-problems-json-where "$(report '[p.split(": ")[0] for p in d["inputs"][0]["first_problems"]]')" \
  "['$log:3:17', '$log:5:1', '$log:6:17']"
expect log-problems-strict 6 "3 records skipped \(--strict\)" -- "$replay" --policy "$policy" --strict "$log"
check log-problems-strict-report-written "$(head -n 1 "$tmp/out")" "input $log (nginx): 7 lines, 4 requests, 3 problems"
expect log-problems-quiet 0 '' -- "$replay" --policy "$policy" -q --json "$log"
check log-problems-quiet-stderr "$(wc -c <"$tmp/err")" 0
check log-problems-quiet-counted "$(report '(d["records"], d["inputs"][0]["problems"])')" "(4, 3)"
expect log-problems-quiet-strict 6 "^sluice-replay: 3 records skipped \(--strict\)$" -- \
  "$replay" --policy "$policy" -q --strict "$log"
# --since and --until: only the records of [since, until) are replayed
# (the log's good lines are at :36, :37, :38 and :41).
expect window-since-until 0 '' -- "$replay" --policy "$policy" -q --json \
  --since 2024-10-10T13:55:37Z --until 2024-10-10T15:55:41+02:00 "$log"
check window-since-until-records "$(report '(d["records"], d["policy"]["requests"])')" "(2, 2)"
expect window-since-epoch 0 '' -- "$replay" --policy "$policy" -q --json --since 1728568538 "$log"
check window-since-epoch-records "$(report '(d["records"], d["policy"]["requests"])')" "(2, 2)"
expect usage-since-not-a-time 2 "--since .*wants a time .*got 'yesterday'" -- \
  "$replay" --policy "$policy" --since yesterday "$log"
expect usage-until-before-since 2 '--until must be later than --since' -- \
  "$replay" --policy "$policy" --since 1728568538 --until 1728568537 "$log"
check log-problems-quiet-strict-one-line "$(grep -c '' "$tmp/err")" 1

# Compressed logs (logrotate's .gz, xz, zstd) are read as the plain one;
# a cut-short log is fatal with where it ended.
for z in gzip xz zstd; do
  "$z" -c "$log" >"$tmp/mixed.log.$z" 2>/dev/null || { fail "compressed-$z" "cannot run $z"; continue; }
  expect "log-$z" 0 '' -- "$replay" --policy "$policy" -q "$tmp/mixed.log.$z"
  check "log-$z-summary" "$(head -n 1 "$tmp/out")" "input $tmp/mixed.log.$z (nginx, $z): 7 lines, 4 requests, 3 problems"
done
head -c 40 "$tmp/mixed.log.gzip" >"$tmp/cut.log.gz"
expect log-gzip-cut 4 "^$tmp/cut.log.gz: gzip: the data ends in the middle of a compressed stream" -- \
  "$replay" --policy "$policy" "$tmp/cut.log.gz"

# ---- streaming: memory, pipes, logs out of order ------------------------------------------

# A million lines are streamed: memory stays that of a step and the
# tables, not of the records (reading them all first took 350 MB).
awk 'BEGIN { for (i = 0; i < 1000000; i++)
  printf "198.18.%d.%d - - [02/Dec/2026:13:%02d:%02d +0000] \"GET /v1/items/%d HTTP/1.1\" 200 512 \"-\" \"bench/1.0\"\n",
    1 + int(i % 2000 / 250), i % 250 + 1, 20 + int(i / 300000), int(i / 5000) % 60, i % 977 }' >"$tmp/million.log"
expect stream-million 0 '' -- /usr/bin/time -f '%M' -o "$tmp/rss" "$replay" --policy config/default.yaml -q --json \
  "$tmp/million.log"
check stream-million-records "$(report '(d["records"], d["policy"]["requests"])')" "(1000000, 1000000)"
holds stream-million-memory "peak RSS $(cat "$tmp/rss") KB, want under 128 MB" test "$(cat "$tmp/rss")" -lt 131072
rm -f "$tmp/million.log"

# A capture is streamed too: a zstd-compressed one of 100 000 connections
# (500 000 packets) takes the memory one of 20 000 takes. Flows are
# forgotten as the appliance forgets them (closed ones 5 s after their
# last packet), so memory follows what is live, not the capture's length.
python3 - "$tmp" <<'PY' || { echo "replay_cli.sh: cannot write the long captures" >&2; exit 2; }
import struct, subprocess, sys
def capture(path, n):
    def frame(src, dst, sport, dport, seq, ack, flags, payload=b''):
        tcp = struct.pack('!HHIIBBHHH', sport, dport, seq, ack, 5 << 4, flags, 65535, 0, 0) + payload
        ip = struct.pack('!BBHHHBBH4s4s', 0x45, 0, 20 + len(tcp), 1, 0x4000, 64, 6, 0, src, dst)
        return b'\x02\0\0\0\0\x02\x02\0\0\0\0\x01\x08\x00' + ip + tcp
    S, ok = bytes([198, 18, 0, 20]), b'HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok'
    SYN, ACK, PSH, FIN = 0x02, 0x10, 0x08, 0x01
    z = subprocess.Popen(['zstd', '-q', '-o', path], stdin=subprocess.PIPE)
    z.stdin.write(struct.pack('<IHHiIII', 0xa1b2c3d4, 2, 4, 0, 0, 65535, 1))
    t = 1700000000 * 1000000
    for i in range(n):
        c, port = bytes([198, 18, 1 + (i // 250) % 4, 1 + i % 250]), 1024 + i % 60000  # 1000 clients
        get = b'GET /v1/items/%d HTTP/1.1\r\nHost: api\r\n\r\n' % (i % 97)
        cs, ss = 1000 + i, 5000
        for k, p in enumerate([frame(c, S, port, 80, cs, 0, SYN), frame(S, c, 80, port, ss, cs + 1, SYN | ACK),
                               frame(c, S, port, 80, cs + 1, ss + 1, PSH | ACK, get),
                               frame(S, c, 80, port, ss + 1, cs + 1 + len(get), PSH | ACK | FIN, ok),
                               frame(c, S, port, 80, cs + 1 + len(get), ss + 2 + len(ok), ACK | FIN)]):
            us = t + 100 * k
            z.stdin.write(struct.pack('<IIII', us // 1000000, us % 1000000, len(p), len(p)) + p)
        t += 2000  # 500 connections a second
    z.stdin.close()
    if z.wait() != 0:
        sys.exit(1)
capture(sys.argv[1] + '/short.pcap.zst', 20000)
capture(sys.argv[1] + '/long.pcap.zst', 100000)
PY
for n in short long; do
  expect "stream-capture-$n" 0 '' -- /usr/bin/time -f '%M' -o "$tmp/rss-$n" "$replay" --policy config/default.yaml -q \
    --json "$tmp/$n.pcap.zst"
  check "stream-capture-$n-counts" "$(report '(d["records"], d["inputs"][0]["units_read"], d["inputs"][0]["problems"])')" \
    "$([ "$n" = short ] && echo "(20000, 100000, 0)" || echo "(100000, 500000, 0)")"
done
holds stream-capture-memory "peak RSS $(cat "$tmp/rss-short") KB for 20 000 connections, $(cat "$tmp/rss-long") KB for 100 000" \
  test "$(cat "$tmp/rss-long")" -lt "$(($(cat "$tmp/rss-short") + 8192))"
rm -f "$tmp"/short.pcap.zst "$tmp"/long.pcap.zst

# A pipe is looked at once (its format, its compression) and read from its
# first byte: the bytes looked at are not lost.
expect stream-pipe 0 '' -- "$replay" --policy "$policy" -q --json <(cat "$log")
check stream-pipe-counts "$(report '(d["records"], d["inputs"][0]["units_read"], d["inputs"][0]["format"])')" \
  "(4, 7, 'nginx')"
expect stream-pipe-gzip 0 '' -- "$replay" --policy "$policy" -q --json <(cat "$tmp/mixed.log.gzip")
check stream-pipe-gzip-counts "$(report '(d["records"], d["inputs"][0]["format"])')" "(4, 'nginx, gzip')"

# A log with $request_time is written as requests end: a slow request's
# line comes after quicker later ones. Within --reorder-window it is put in
# its place; past it, decided at its own time and counted in a warning.
late_format='$remote_addr [$time_iso8601] "$request" $status $request_time'
# Enough lines that the slow one is read a step after the merge let go of
# the lines before it (a step is a few MiB; within one, any order is put right).
awk 'BEGIN {
  for (i = 0; i < 40000; i++) print "198.18.0.1 [2026-12-02T13:20:15+00:00] \"GET /a HTTP/1.1\" 200 0.000"
  for (i = 0; i < 40000; i++) print "198.18.0.2 [2026-12-02T13:21:30+00:00] \"GET /a HTTP/1.1\" 200 0.000"
  print "198.18.0.3 [2026-12-02T13:22:00+00:00] \"GET /slow HTTP/1.1\" 200 115.000" }' >"$tmp/late.log"
expect stream-late-warned 0 'warning: 1 record came after later ones of their input by more than the reorder window \(at most 10\.000 s\)' -- \
  "$replay" --policy "$policy" --json --log-format "$late_format" "$tmp/late.log"
check stream-late-decided "$(report 'd["records"]')" 80001
expect stream-late-in-window 0 '' -- "$replay" --policy "$policy" --json --log-format "$late_format" \
  --reorder-window 3m "$tmp/late.log"
check stream-late-in-window-quiet "$(grep -c 'reorder window' "$tmp/err")" 0
expect usage-reorder-window 2 "--reorder-window .*wants a duration .*got 'soon'" -- \
  "$replay" --policy "$policy" --reorder-window soon "$log"

# ---- credential digests: the same label in every report ------------------------------

# Without --state-dir a credential's digest is keyed with the operator's
# label secret, made on first use (0600 in a 0700 directory): two reports
# name the same credential alike; another label directory, another name.
cred_format='$remote_addr [$time_iso8601] "$request" $status "$http_authorization"'
for i in $(seq 1 320); do
  echo '198.18.0.9 [2026-12-02T13:20:00+00:00] "GET /x HTTP/1.1" 200 "Bearer tok-alpha"'
done >"$tmp/cred.log"
credential_key() { report '[k["key"] for k in d["policy"]["refused_keys"] if k["key"].startswith("credential ")]'; }
export XDG_STATE_HOME="$tmp/xdg-fresh"
expect labels-first 0 '' -- "$replay" --policy "$policy" -q --json --log-format "$cred_format" "$tmp/cred.log"
first_key="$(credential_key)"
check labels-made "$(report 'd["credential_labels"]')" "$tmp/xdg-fresh/sluice-replay/label.secret (made now)"
check labels-file-mode "$(stat -c '%a %s' "$tmp/xdg-fresh/sluice-replay/label.secret")" "600 192"
check labels-dir-mode "$(stat -c '%a' "$tmp/xdg-fresh/sluice-replay")" "700"
expect labels-again 0 '' -- "$replay" --policy "$policy" -q --json --log-format "$cred_format" "$tmp/cred.log"
check labels-same-key "$(credential_key)" "$first_key"
check labels-kept "$(report 'd["credential_labels"]')" "$tmp/xdg-fresh/sluice-replay/label.secret"
holds labels-a-credential-key "no credential key refused: $first_key" grep -q "credential [0-9a-f]\{32\}" <<<"$first_key"
expect labels-other-dir 0 '' -- "$replay" --policy "$policy" -q --json --log-format "$cred_format" \
  --label-dir "$tmp/other-labels" "$tmp/cred.log"
holds labels-other-dir-other-key "the same key under another label secret: $(credential_key)" \
  test "$(credential_key)" != "$first_key"
expect labels-box-secret 0 '' -- "$replay" --policy "$policy" -q --json --state-dir "$tmp/state" \
  --log-format "$cred_format" "$tmp/cred.log"
check labels-box-secret-named "$(report 'd["credential_labels"]')" "the box's secret ($tmp/state/credential.secret)"
expect labels-nowhere 0 'warning: credential digests are keyed for this run only: no directory' -- \
  env -u XDG_STATE_HOME -u HOME "$replay" --policy "$policy" --json --log-format "$cred_format" "$tmp/cred.log"
chmod 755 "$tmp/xdg-fresh/sluice-replay"
expect labels-dir-too-open 0 'keyed for this run only: state directory .* has mode 0755' -- \
  "$replay" --policy "$policy" --json --log-format "$cred_format" "$tmp/cred.log"
check labels-dir-too-open-said "$(report 'd["credential_labels"]')" "a secret drawn for this run: they match no other report's"
export XDG_STATE_HOME="$tmp/xdg"
expect labels-none-needed 0 '' -- "$replay" --policy config/default.yaml -q --json "$log"
check labels-none-needed-empty "$(report 'd["credential_labels"]')" ""

# ---- skipped records: captures --------------------------------------------------------

expect capture-whole 0 '' -- "$replay" --policy "$policy" --json "$tmp/whole.pcap"
check capture-whole-counts "$(report '(d["records"], d["inputs"][0]["units_read"], d["inputs"][0]["problems"])')" "(2, 6, 0)"
check capture-whole-stderr "$(wc -c <"$tmp/err")" 0
expect capture-cut 0 "^$tmp/cut.pcap: packet 6: the file ends [0-9]+ bytes into the packet's" -- \
  "$replay" --policy "$policy" --json "$tmp/cut.pcap"
check capture-cut-counts "$(report '(d["records"], d["inputs"][0]["problems"])')" "(1, 1)"
check capture-cut-one-problem "$(grep -c '' "$tmp/err")" 1
expect capture-cut-strict 6 "1 record skipped \(--strict\)" -- "$replay" --policy "$policy" --strict "$tmp/cut.pcap"
expect pcapng-whole 0 '' -- "$replay" --policy "$policy" --json "$tmp/whole.pcapng"
check pcapng-whole-counts "$(report '(d["records"], d["inputs"][0]["problems"])')" "(2, 0)"
expect pcapng-bad-block 0 "^$tmp/badblock.pcapng: (byte [0-9]+|packet [0-9]+): " -- \
  "$replay" --policy "$policy" --json "$tmp/badblock.pcapng"
check pcapng-bad-block-counts "$(report '(d["records"], d["inputs"][0]["problems"])')" "(1, 1)"
# A capture split by direction is read as one: both files' packets merged
# by time, each connection's halves together, so every request and refusal
# of the whole capture is found, whichever file is named first; each input
# counts its own packets (126 from the client, 123 from the origin).
expect split-whole 0 '' -- "$replay" --policy "$policy" --json "$tmp/keepalive.pcap"
whole_counts="$(report '(d["records"], d["policy"]["refused"])')"
check split-whole-counts "$(report 'd["records"]')" 120
holds split-whole-refuses "the whole capture refuses nothing: $whole_counts" test "$(report 'd["policy"]["refused"]')" -gt 0
for pair in in,out out,in; do
  first="${pair%,*}" second="${pair#*,}"
  expect "split-$first-$second" 0 '' -- "$replay" --policy "$policy" --json "$tmp/keepalive-$first.pcap" "$tmp/keepalive-$second.pcap"
  check "split-$first-$second-counts" "$(report '(d["records"], d["policy"]["refused"])')" "$whole_counts"
  in_summary="('in.pcap', 126, 120, 0)" out_summary="('out.pcap', 123, 0, 0)"
  if [ "$first" = in ]; then want="[$in_summary, $out_summary]"; else want="[$out_summary, $in_summary]"; fi
  check "split-$first-$second-inputs" \
    "$(report '[(i["name"].rsplit("-", 1)[1], i["units_read"], i["records"], i["problems"]) for i in d["inputs"]]')" "$want"
  check "split-$first-$second-stderr" "$(wc -c <"$tmp/err")" 0
done
# Compressed captures too, streamed like the logs: a rotated capture split
# by direction and compressed (gzip, xz, zstd; one of them through a pipe)
# gives every request and refusal the plain files give.
for z in gzip xz zstd; do
  for half in in out; do "$z" -c "$tmp/keepalive-$half.pcap" >"$tmp/keepalive-$half.pcap.$z"; done
  expect "capture-$z" 0 '' -- "$replay" --policy "$policy" --json "$tmp/keepalive-in.pcap.$z" "$tmp/keepalive-out.pcap.$z"
  check "capture-$z-counts" "$(report '(d["records"], d["policy"]["refused"])')" "$whole_counts"
  check "capture-$z-inputs" "$(report '[(i["format"], i["units_read"], i["records"]) for i in d["inputs"]]')" \
    "[('pcap, $z', 126, 120), ('pcap, $z', 123, 0)]"
done
expect capture-pipe-zstd 0 '' -- "$replay" --policy "$policy" --json <(cat "$tmp/keepalive-in.pcap.zstd") \
  <(cat "$tmp/keepalive-out.pcap.zstd")
check capture-pipe-zstd-counts "$(report '(d["records"], d["policy"]["refused"])')" "$whole_counts"
# Cut short: what came before the cut is replayed, and the input is said
# not to be whole (exit 4), the reason first.
size="$(stat -c %s "$tmp/keepalive-in.pcap.gzip")"
head -c "$((size / 2))" "$tmp/keepalive-in.pcap.gzip" >"$tmp/cut.pcap.gz"
expect capture-gzip-cut 4 "^$tmp/cut.pcap.gz: gzip: the data ends in the middle of a compressed stream" -- \
  "$replay" --policy "$policy" --json "$tmp/cut.pcap.gz" "$tmp/keepalive-out.pcap"
for f in "$tmp"/damaged?.pcap "$tmp"/noise?.pcap "$tmp"/noise?.pcapng; do
  expect "capture-damaged-$(basename "$f")" 0 '' -- "$replay" --policy "$policy" --json "$f"
done

# ---- the reports ------------------------------------------------------------------------

expect html-no-directory 1 "^sluice-replay: cannot write $tmp/nodir/report.html" -- \
  "$replay" --policy "$policy" -q --html "$tmp/nodir/report.html" "$log"
expect html-written 0 '' -- "$replay" --policy "$policy" -q --html "$tmp/report.html" "$log"
holds html-written-file "$tmp/report.html is empty or missing" test -s "$tmp/report.html"
expect json-one-line 0 '' -- "$replay" --policy "$policy" -q --json --compare config/default.yaml "$log"
check json-one-line-lines "$(grep -c '' "$tmp/out")" 1
holds json-valid "not JSON: $(head -c 300 "$tmp/out")" python3 -m json.tool "$tmp/out" /dev/null

run "$replay" --help
missing=""
for o in -h --help --version --policy --compare --format --log-format --json-field --service-ports --state-dir \
  --runs --credentials --json --html --top --strict -q --quiet --threads --buckets; do
  grep -qE -- "(^| |,)$o([ ,]|$)" "$tmp/out" || missing="$missing $o"
done
for c in 0 1 2 3 4 5 6; do grep -qE "(^| )$c [a-z-]" <(sed -n '/^Exit codes:/,$p' "$tmp/out") || missing="$missing exit-$c"; done
if [ "$rc" -eq 0 ] && [ -z "$missing" ]; then echo "PASS help (every option, exit codes 0-6)"
else fail help "exit $rc, missing:$missing"; fi
version="$(sed -n "s/^ *version *: *'\([^']*\)',.*/\1/p" meson.build | head -n 1)"
run "$replay" --version
check version "$rc $(cat "$tmp/out")" "0 sluice-replay $version"

# ---- 100 000 lines of garbage -----------------------------------------------------------

expect garbage 0 "^$tmp/garbage.log:1:1: " -- "$replay" --policy "$policy" "$tmp/garbage.log"
check garbage-stderr-lines "$(grep -c '' "$tmp/err")" 101
problems="$(sed -n 's/^input .*: 100000 lines, 0 requests, \([0-9]*\) problems$/\1/p' "$tmp/out")"
check garbage-and-more "$(tail -n 1 "$tmp/err")" "$tmp/garbage.log: ... and $((${problems:-100} - 100)) more problems"
holds garbage-counted "summary: $(head -n 1 "$tmp/out")" test "${problems:-0}" -gt 99000
expect garbage-strict 6 "^sluice-replay: $problems records skipped \(--strict\)$" -- \
  "$replay" --policy "$policy" -q --strict "$tmp/garbage.log"

# ---- hostile text never reaches the terminal raw ----------------------------------------

# no_esc NAME: the last run's summary (stdout) and problems (stderr) hold
# no ESC byte. check_printable NAME: no control byte at all (C0, DEL, C1 as
# a lone byte or as UTF-8): the summary is ASCII text, whatever came in.
no_esc() {
  if LC_ALL=C grep -q $'\x1b' "$tmp/out" "$tmp/err"; then
    fail "$1" "a raw ESC: $(LC_ALL=C grep -n $'\x1b' "$tmp/out" "$tmp/err" | head -n 3 | cat -v | tr '\n' ' ')"
  else echo "PASS $1"; fi
}
check_printable() {
  local f bad=""
  for f in out err; do printable "$tmp/$f" || bad="$bad $f: $(LC_ALL=C grep -n '[^[:print:]]' "$tmp/$f" | head -n 2 | cat -v | tr '\n' ' ')"; done
  if [ -z "$bad" ]; then echo "PASS $1"; else fail "$1" "control bytes in$bad"; fi
}
expect hostile-nginx 0 "hostile.log:7:1: the client address is not an IP address: \"198.18.0.7\\\\x1B\[31m\"" -- \
  "$replay" --policy "$policy" "$tmp/hostile.log"
no_esc hostile-nginx-no-esc
check_printable hostile-nginx-printable
dq_format='$remote_addr [$time_local] "$request" "$http_x_pi_deployment"'
expect hostile-key 0 '' -- "$replay" --policy config/deployment-quotas.yaml --log-format "$dq_format" "$tmp/hostile-key.log"
holds hostile-key-listed "$(cat "$tmp/out")" grep -qE '^  deployment +evil.*700 +100 ' "$tmp/out"
no_esc hostile-key-no-esc
check_printable hostile-key-printable
expect hostile-json 0 "hostile.json:2:[0-9]+: not a JSON line" -- "$replay" --policy "$policy" "$tmp/hostile.json"
no_esc hostile-json-no-esc
check_printable hostile-json-printable
expect hostile-json-report 0 '' -- "$replay" --policy "$policy" -q --json "$tmp/hostile.json"
holds hostile-json-report-valid "not JSON" python3 -m json.tool "$tmp/out" /dev/null

[ "$failures" -eq 0 ] && echo "replay_cli: all passed" || echo "replay_cli: $failures failed"
[ "$failures" -eq 0 ]
