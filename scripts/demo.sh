#!/usr/bin/env bash
# The README's first command: installs what is missing, builds, and runs the
# appliance inline between a client and an origin, each in a network
# namespace of its own (the integration tests' topology, tests/integration/
# topology.sh): nginx as the origin, sluiced on the AF_PACKET driver in the
# middle with the default policy (config/default.yaml: 120 requests a
# minute per client address, bursts of 60), curl and a keep-alive client on
# the other side. It shows admissions turning into 429s with their headers,
# a malformed request answered 400, IPv6, and what reached the origin; then
# tears everything down, also when interrupted. Needs root.
#
#   scripts/demo.sh              the network demo
#   scripts/demo.sh --offline    the limiter core alone, without a network (sluice-demo)
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"

scripts/install-deps.sh demo
echo "== building (build/)"
scripts/build.sh build --buildtype=release
echo

if [ "${1:-}" = "--offline" ]; then
  exec ./build/src/sluice-demo
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "demo.sh: the network demo needs root (network namespaces, raw sockets); 'scripts/demo.sh --offline' does not" >&2
  exit 3
fi

# shellcheck source=../tests/integration/topology.sh
. tests/integration/topology.sh
# shellcheck source=../tests/integration/origin.sh
. tests/integration/origin.sh
SLUICE_APPLIANCE=sluiced
SLUICED="$root/build/src/sluiced"
policy="$root/config/default.yaml"

slt_clean_stale
slt_init "slt-$$"
trap 'topology_down' EXIT
trap 'exit 130' INT TERM

if [ -t 1 ]; then
  say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
else
  say() { printf '\n== %s\n' "$*"; }
fi
py() { in_cli "$SLT_PY" "$root/tests/integration/http_client.py" "$@"; }

say "building the topology: client ($NS_CLI) -- sluiced ($NS_BOX) -- nginx ($NS_ORG)"
topology_up
origin_start
if ! appliance_start "$policy" 1; then
  echo "demo.sh: sluiced did not start" >&2
  exit 1
fi
sed 's/^/  | /' "$SLT_APPLIANCE_LOG"

# The demo's traffic, captured on the clients' side for sluice-replay at the
# end (bounded: tcpdump stops by itself after 120 s).
capture="$SLT_TMP/demo.pcap"
capture_pid=""
if command -v tcpdump >/dev/null; then
  in_cli timeout -s INT 120 tcpdump -i c0 --immediate-mode -U -s 0 -w "$capture" 'tcp port 80' >"$SLT_TMP/tcpdump.log" 2>&1 &
  capture_pid=$!
  for _ in $(seq 50); do grep -q 'listening on' "$SLT_TMP/tcpdump.log" && break; sleep 0.1; done
fi

say "one request from the client through the appliance (curl -i)"
in_cli curl -sS -i --max-time 5 "http://$ORIGIN4/v1/models"

say "a burst of 70 requests on one keep-alive connection from 198.18.0.10"
echo "   the policy allows bursts of 60, then 2 a second; the curl above took one"
py --host "$ORIGIN4" --source "$CLIENT4" --count 70 --path '/v1/items/{i}' --timeout 20 --out "$SLT_TMP/burst.json" || true
"$SLT_PY" - "$SLT_TMP/burst.json" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
responses = [r for r in rows if "status" in r]
ok = [r for r in responses if r["status"] == 200]
print(f"   admitted: {len(ok)}, then", end=" ")
refused = [r for r in responses if r["status"] != 200]
if refused:
    r = refused[0]
    print(f"request {r['i']} got {r['status']} and the connection was {'closed' if r.get('closed') else 'kept'}")
    more = [x for x in refused[1:] if x["conn"] == r["conn"]]
    if more:
        print(f"   the {len(more)} after it were answered on the same connection: "
              + ", ".join(str(x["status"]) for x in more))
    for name in ("Retry-After", "RateLimit-Policy", "RateLimit", "Connection", "Content-Type"):
        for k, v in r["headers"].items():
            if k.lower() == name.lower():
                print(f"     {k}: {v}")
    print(f"     body: {r.get('body', '')[:120]}")
else:
    print("no refusal (the machine was too slow to burst?)")
EOF

say "the next request from the same address, on a new connection (curl -i)"
in_cli curl -sS -i --max-time 5 "http://$ORIGIN4/v1/models" || true

say "another address has a budget of its own (198.18.0.101)"
in_cli curl -sS -o /dev/null -w '   %{http_code} from 198.18.0.101\n' --interface 198.18.0.101 --max-time 5 "http://$ORIGIN4/v1/models"

say "IPv6: the same through [2001:db8::20]"
in_cli curl -sS -o /dev/null -w '   %{http_code} over IPv6\n' --max-time 5 "http://[$ORIGIN6]/v1/models"

say "a request-smuggling attempt (Content-Length and Transfer-Encoding) gets 400 from the appliance"
in_cli bash -c "exec 3<>/dev/tcp/$ORIGIN4/80; printf 'POST /v1/x HTTP/1.1\r\nHost: api\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n' >&3; timeout 5 head -n 1 <&3" | sed 's/^/   /'

say "the health check is exempt: /healthz from the refused address"
in_cli curl -sS -o /dev/null -w '   %{http_code} for /healthz\n' --max-time 5 "http://$ORIGIN4/healthz"

sleep 0.5
say "what reached the origin (nginx's access log), by address"
awk '{ n[$1]++ } END { for (a in n) printf "   %-16s %d requests\n", a, n[a] }' "$SLT_TMP/nginx/access.log" | sort

ctl() { "$root/build/src/sluicectl" --socket "$SLT_TMP/control.sock" "$@"; }
say "sluicectl, over sluiced's control socket: status, and the counters so far"
ctl status | sed 's/^/   /'
echo
ctl stats | awk 'NR == 1 || ($2 != 0 && $2 != "") ' | sed 's/^/   /'

say "sluicectl bucket show: what is left of $CLIENT4's budget (read, not charged)"
ctl bucket show per-client "$CLIENT4" | sed 's/^/   /'

if [ -n "$capture_pid" ]; then
  sleep 0.3
  kill -INT "$capture_pid" 2>/dev/null
  wait "$capture_pid" 2>/dev/null || true
  say "sluice-replay: the same traffic (tcpdump on the client's side) decided offline by the same policy"
  "$root/build/src/sluice-replay" --policy "$policy" --html "$root/build/demo-replay.html" "$capture" | sed 's/^/   /'
  echo "   (the per-rule counts equal sluicectl stats above; the report with plots: build/demo-replay.html)"
fi

say "stopping sluiced (SIGTERM)"
appliance_stop || true
grep -E '^sluiced: stopping' "$SLT_APPLIANCE_LOG" | sed 's/^/  | /'
say "done; tearing the namespaces down"
