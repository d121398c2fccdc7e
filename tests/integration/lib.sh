#!/usr/bin/env bash
# Helpers for the integration tests (sourced by tests.sh after topology.sh):
# failure collection, the clients (curl, http_client.py), the origin's access
# log, and the policy copies some tests run under.

SLT_FAILS=()

# fail WHY: records a failure; the test goes on (so one run reports every
# broken assertion) and ends with finish.
fail() { SLT_FAILS+=("$*"); }
failed() { [ ${#SLT_FAILS[@]} -gt 0 ]; }

# A value as a failure message shows it: one line, at most 160 characters.
shown() {
  local v="${1//$'\r'/\\r}"
  v="${v//$'\n'/\\n}"
  [ ${#v} -gt 160 ] && v="${v:0:150}...(${#1} chars)"
  printf '%s' "$v"
}
check_eq() {  # check_eq WHAT GOT WANT
  [ "$2" = "$3" ] || fail "$1: got '$(shown "$2")', want '$(shown "$3")'"
}
check_range() {  # check_range WHAT GOT LO HI (integers)
  if ! [[ "$2" =~ ^[0-9]+$ ]] || [ "$2" -lt "$3" ] || [ "$2" -gt "$4" ]; then
    fail "$1: got '$(shown "$2")', want an integer in [$3, $4]"
  fi
}
check_re() {  # check_re WHAT GOT ERE
  [[ "$2" =~ $3 ]] || fail "$1: got '$(shown "$2")', want a match for /$3/"
}

# Ends the test: exit 0, or 1 with the reasons in $SLT_WHY (run.sh prints them).
finish() {
  if failed; then
    printf '%s\n' "${SLT_FAILS[@]}" >"$SLT_WHY"
    exit 1
  fi
  exit 0
}

# refill_hint CLIENT... : for budgets that refill every second (the shipped
# profiles), a failing count may be the refill if a client run took about a
# second; say so next to the failures.
refill_hint() {
  failed || return 0
  local name el
  for name in "$@"; do
    el="$(res summary "$name" elapsed)"
    if "$SLT_PY" -c "import sys; sys.exit(0 if float('${el:-0}') >= 0.9 else 1)" 2>/dev/null; then
      fail "(client run '$name' took ${el}s, near the 1 s a token takes to refill here: counts may be off by the refill)"
    fi
  done
}

# Prints a note into the test's own log (kept in the artifacts).
note() { printf '  # %s\n' "$*"; }

# ---------------------------------------------------------------- clients

# client NAME ARGS...: http_client.py in the client namespace, to the origin's
# IPv4 address unless ARGS say --host; its JSON lines go to $SLT_OUT/NAME.jsonl
# and its exit status to CLIENT_RC. Bounded by its own --timeout (default 20 s)
# and, to be sure, by timeout(1).
client() {
  local name="$1"
  shift
  ip netns exec "$NS_CLI" timeout -k 2 60 "$SLT_PY" "$SLT_HERE/http_client.py" --host "$ORIGIN4" \
    --out "$SLT_OUT/$name.jsonl" "$@" >"$SLT_OUT/$name.stdout" 2>&1
  CLIENT_RC=$?
  if [ ! -s "$SLT_OUT/$name.jsonl" ]; then
    fail "$name: http_client.py wrote nothing (status $CLIENT_RC): $(tail -c 400 "$SLT_OUT/$name.stdout")"
    printf '{"summary": true, "errors": ["no output"]}\n' >"$SLT_OUT/$name.jsonl"
  fi
  note "client $name: status $CLIENT_RC, $(res statuses "$name") ($(res summary "$name" elapsed) s)"
  return 0
}

# res CMD NAME ARGS...: results.py on a client run's output.
res() {
  local cmd="$1" name="$2"
  shift 2
  "$SLT_PY" "$SLT_HERE/results.py" "$cmd" "$SLT_OUT/$name.jsonl" "$@"
}

# ccurl NAME ARGS...: curl in the client namespace; headers to
# $SLT_OUT/NAME.headers, body to $SLT_OUT/NAME.body; prints the status code.
ccurl() {
  local name="$1"
  shift
  ip netns exec "$NS_CLI" curl --noproxy '*' -sS --connect-timeout 5 --max-time 15 \
    -D "$SLT_OUT/$name.headers" -o "$SLT_OUT/$name.body" -w '%{http_code}' "$@" 2>"$SLT_OUT/$name.stderr"
}
# chdr NAME FIELD: a field of the last response curl saved for NAME.
chdr() {
  awk -v want="$(tr 'A-Z' 'a-z' <<<"$2")" 'BEGIN{RS="\r?\n"} /^HTTP\//{v=""; found=0}
    { i=index($0, ":"); if (i>0 && tolower(substr($0,1,i-1))==want) { v=substr($0,i+1); sub(/^[ \t]+/,"",v); sub(/[ \t]+$/,"",v); found=1 } }
    END{ if (found) print v }' "$SLT_OUT/$1.headers"
}
cbody() { cat "$SLT_OUT/$1.body"; }

# ---------------------------------------------------------------- origin log

SLT_ACCESS_LOG() { echo "$SLT_TMP/nginx/access.log"; }

# Every line counts, whatever its status: a request the appliance refused
# must leave no line at all. (nginx logs even a partial request, one whose
# connection ended in the middle of it, as a 400 line, "-" for what it had
# not parsed, so a refused head that leaked in part shows up as an extra
# line from its address.)
#
# olog_mark: later olog_count/olog_lines calls in this test see only the lines
# written after it (for CLIENT4, which several tests and the readiness probes
# share; every other test has addresses of its own).
SLT_OLOG_MARK=0
olog_mark() {
  olog_settle
  SLT_OLOG_MARK="$(wc -l <"$(SLT_ACCESS_LOG)")"
}

# The access log's lines from one client address (field 1), once the log has
# stopped growing (nginx writes a line after the response has gone out).
olog_settle() {
  local prev=-1 cur i
  for ((i = 0; i < 30; i++)); do
    cur="$(wc -l <"$(SLT_ACCESS_LOG)")"
    [ "$cur" = "$prev" ] && return 0
    prev="$cur"
    sleep 0.15
  done
}
olog_lines() { awk -v a="$1" -v m="$SLT_OLOG_MARK" 'NR > m && $1 == a' "$(SLT_ACCESS_LOG)"; }
olog_count() {  # olog_count ADDR [AWK-CONDITION]: lines from ADDR (every one, without a condition)
  olog_settle
  awk -v a="$1" -v m="$SLT_OLOG_MARK" "NR > m && \$1 == a ${2:+&& ($2)} { n++ } END { print n + 0 }" "$(SLT_ACCESS_LOG)"
}
# check_olog WHAT ADDR WANT: the number of lines from ADDR (any status); when
# it is off, the failure lists what the origin got (method, URI, status).
check_olog() {
  local got
  got="$(olog_count "$2")"
  [ "$got" = "$3" ] || fail "$1: origin log lines from $2: got $got, want $3: $(olog_lines "$2" | awk '{ printf "%s %s %s, ", $2, $3, $4 }' | tail -c 300)"
}

# ---------------------------------------------------------------- misc

# Wall-clock seconds (fractional).
now_s() { date +%s.%N; }

# Is the appliance the kernel bridge (limiting tests cannot pass)?
stand_in() { [ "$SLUICE_APPLIANCE" = kernel-bridge ]; }

# The client namespace's TCP segment counter (nstat is per namespace).
tcp_out_segs() {
  ip netns exec "$NS_CLI" nstat -az TcpOutSegs 2>/dev/null | awk '$1 == "TcpOutSegs" { print $2 }'
}

# ---------------------------------------------------------------- policies

# The policy copies some tests run under, written into $SLT_TMP/policies.
# Each edit must apply exactly once, so a change to the shipped file makes
# this fail loudly instead of testing something else.
#   tb-small: three-budgets with a bare budget of 20 and a credential budget
#   of 4 per HOUR (no refill within a test, so counts are exact however slow
#   the machine is), the Chromium page's origin granted (TB08/TB09), and
#   connections closed after a refusal (after_answer: close, the other way
#   the appliance can answer; the shipped profiles keep them open).
#   tb-hourly: three-budgets with the shipped bare burst of 60, refilled per
#   HOUR (a token a minute), for the tests that count 60 requests (across
#   keep-alive connections, pipelined past the 32-request back-pressure, with
#   a tiny MSS, over IPv6): the shipped 60/min refills a token every second,
#   which a slow run would see as one request too many admitted.
make_policies() {
  mkdir -p "$SLT_TMP/policies"
  slt_policy_copy three-budgets tb-small three-budgets-small \
    '  allow_origins: []\n' '  allow_origins: ["http://198.18.0.20:8080"]\n' \
    '  credential: { rate: 300/min, burst: 300 }\n' '  credential: { rate: 4/hour, burst: 4 }\n' \
    '  bare:       { rate: 60/min, burst: 60 }\n' '  bare:       { rate: 20/hour, burst: 20 }\n' \
    'after_answer: keep-alive\n' 'after_answer: close\n' || return 1
  # tb-small with adoption on: connections older than a restart taken up
  # at their next request head (wire-adopt-restart).
  slt_policy_copy three-budgets tb-adopt three-budgets-adopt \
    '  allow_origins: []\n' '  allow_origins: ["http://198.18.0.20:8080"]\n' \
    '  credential: { rate: 300/min, burst: 300 }\n' '  credential: { rate: 4/hour, burst: 4 }\n' \
    '  bare:       { rate: 60/min, burst: 60 }\n' '  bare:       { rate: 20/hour, burst: 20 }\n' \
    'after_answer: keep-alive\n' 'after_answer: close\nadoption: on\n' || return 1
  slt_policy_copy three-budgets tb-hourly three-budgets-hourly \
    '  bare:       { rate: 60/min, burst: 60 }\n' '  bare:       { rate: 60/hour, burst: 60 }\n' || return 1
  # CONNECT and HTTP/2 prior knowledge allowed (so that their
  # framing is what is refused), and /hk/ limited per Host.
  slt_policy_copy three-budgets tb-strict three-budgets-strict \
    'after_answer: keep-alive\n' 'after_answer: keep-alive\nlimits:\n  allow_connect: true\n  allow_h2_prior_knowledge: true\n' \
    '  bare:       { rate: 60/min, burst: 60 }\n' '  bare:       { rate: 60/hour, burst: 60 }\n  per-host:   { rate: 5/hour, burst: 5 }\n' \
    '  # TB01: everything else, per client address.\n' '  - name: per-host\n    path: "/hk/*"\n    key: host\n    bucket: per-host\n  # TB01: everything else, per client address.\n' || return 1
  # wire-path-corpus: default's /healthz exemption, a second service port
  # (8088, a second origin), /v1/* on a bucket of its own beside the
  # catch-all, budgets no corpus run uses up; IETF fields name the bucket
  # that counted a request (RateLimit-Policy), an exempt one carries none.
  slt_policy_copy default default-paths default-paths \
    'service_ports: [80]\n' 'service_ports: [80, 8088]\n' \
    '  per-client: { rate: 120/min, burst: 60 }\n' '  per-client: { rate: 100000/hour, burst: 100000 }\n  v1: { rate: 100000/hour, burst: 100000 }\n' \
    'rules:\n' 'rules:\n  - name: v1\n    path: "/v1/*"\n    key: client_ip\n    bucket: v1\n' || return 1
  # A day quota at UTC+05:30 (its day begins at 18:30 UTC), an hour quota
  # at UTC beside it on another path, a rate per day, two budgets layered
  # on one rule, draft-11 fields and problem-details refusals: what
  # operators ask for beyond the minute.
  cat >"$SLT_TMP/policies/dq-day.yaml" <<'YAML'
# Written by tests/integration/lib.sh: hour and day windows.
sluice: 1
name: dq-day
header_style: ietf
service_ports: [80]
# A response unread for 3 s is cut (dq-slow-readers-cut).
deadlines:
  response: 3s
buckets:
  per-day: { window: day, utc_offset: "+05:30", requests: 3 }
  per-hour: { window: hour, requests: 2 }
  daily-rate: { rate: 2/day }
  l-window: { window: hour, requests: 5 }
  l-rate: { rate: 2/hour, burst: 2 }
  b-rate: { rate: 2/hour, burst: 2 }
  c-plenty: { rate: 1000/hour, burst: 1000 }
  d-rate: { rate: 2/s, burst: 1 }
rules:
  - name: delayed
    path: "/delay/*"
    key: client_ip
    bucket: d-rate
    delay_max: 1500ms
    delay_per_key: 2
  - name: concurrent
    path: /big
    key: client_ip
    bucket: c-plenty
    concurrency: 2
  - name: boxed
    path: "/boxed/*"
    key: client_ip
    bucket: b-rate
    penalty: { after: 3, within: 1h, for: 1h }
  - name: layered
    path: "/layered/*"
    key: client_ip
    bucket: [l-window, l-rate]
  - name: hourly
    path: "/hour/*"
    key: client_ip
    bucket: per-hour
  - name: rate
    path: "/rate/*"
    key: client_ip
    bucket: daily-rate
  - name: daily
    key: { header: X-Pi-Deployment }
    bucket: per-day
refusal:
  style: problem
YAML
  # The PROXY protocol from a load balancer (HAProxy at 198.18.0.250, which
  # the test adds): stripped before an origin that does not read it, or
  # kept for one that does (nginx's proxy_protocol listener on 8081).
  local mode port
  for mode in strip keep; do
    port=80
    [ "$mode" = keep ] && port=8081
    cat >"$SLT_TMP/policies/pp-$mode.yaml" <<YAML
# Written by tests/integration/lib.sh: the PROXY protocol ($mode).
sluice: 1
name: pp-$mode
header_style: ietf
service_ports: [$port]
client_ip:
  trusted_proxies: [198.18.0.250/32]
  proxy_protocol: $mode
buckets:
  per-client: { rate: 2/hour, burst: 2 }
rules:
  - name: per-client
    key: client_ip
    bucket: per-client
YAML
  done
  # Short deadlines, so that a slow-head crowd is seen off within
  # a test's seconds.
  slt_policy_copy three-budgets tb-deadlines three-budgets-deadlines \
    'after_answer: keep-alive\n' 'after_answer: keep-alive\ndeadlines:\n  head: 3s\n  body: 5s\n  keep_alive: 20s\n' \
    '  bare:       { rate: 60/min, burst: 60 }\n' '  bare:       { rate: 60/hour, burst: 60 }\n' || return 1
}

# slt_policy_copy SHIPPED COPY NEW-NAME [OLD NEW]...: config/SHIPPED.yaml to
# $SLT_TMP/policies/COPY.yaml, renamed, each OLD replaced by NEW ("\n" in
# them is a newline). Each edit must apply exactly once, so a change to the
# shipped file makes this fail loudly instead of testing something else.
slt_policy_copy() {
  "$SLT_PY" - "$SLT_REPO/config/$1.yaml" "$SLT_TMP/policies/$2.yaml" "$1" "$3" "${@:4}" <<'EOF'
import sys
src, dst, base, name = sys.argv[1:5]
args = [a.replace("\\n", "\n") for a in sys.argv[5:]]
text = open(src).read()
edits = [("name: %s\n" % base, "name: %s\n" % name)] + list(zip(args[0::2], args[1::2]))
for old, new in edits:
    if text.count(old) != 1:
        sys.exit("make_policies: %r occurs %d times in %s (expected once)" % (old.strip(), text.count(old), src))
    text = text.replace(old, new)
open(dst, "w").write("# Generated by tests/integration/lib.sh from config/%s.yaml.\n" % base + text)
EOF
}

# policy_file NAME: the file for a registry policy name.
policy_file() {
  case "$1" in
    three-budgets | route-families | deployment-quotas | default) echo "$SLT_REPO/config/$1.yaml" ;;
    *) echo "$SLT_TMP/policies/$1.yaml" ;;
  esac
}
