#!/usr/bin/env bash
# The integration tests. run.sh builds the topology, starts the origin and
# the appliance each test needs, then runs every test in its own process:
#   tests.sh run NAME        (with run.sh's environment)
#   tests.sh list            the registry below
# A test prints notes to its log and ends with finish: exit 0 passes, exit 1
# fails with the reasons written to $SLT_WHY.
#
# Registry: name, kind, policy, workers, and "restart" for a test whose
# first phase (t_NAME_before) runs before sluiced is restarted with the same
# state directory. "plumbing" tests check the topology,
# the origin, the clients and the impairment; they pass against the kernel
# bridge stand-in too. "limiting" tests need the appliance's limiting and
# fail against the stand-in. Test names and comments carry the rule ids of
# docs/rules.md they check. Tests run in this order (grouped by
# policy, so the appliance restarts only between groups); each test's index
# in this list picks its own client addresses (src4/src6), so every test has
# budgets of its own.
SLT_REGISTRY='
plumbing-ipv4                plumbing  three-budgets      1
plumbing-ipv6                plumbing  three-budgets      1
plumbing-keepalive           plumbing  three-budgets      1
plumbing-pipelined           plumbing  three-budgets      1
plumbing-tinymss             plumbing  three-budgets      1
tb-bare-budget               limiting  three-budgets      1
ctl-run-budget               limiting  three-budgets      1
ctl-runs-restart             limiting  three-budgets      1  restart
ctl-slots-crash              limiting  three-budgets      1  crash
rf-blowhorn-budget           limiting  route-families     1
rf-client-ip-headers         limiting  route-families     1
rf-unknown-credential        limiting  route-families     1
ctl-credentials              limiting  route-families     1
dq-rpm-quota                 limiting  deployment-quotas  1
ctl-usage-report             limiting  deployment-quotas  1
dq-usage-from-response       limiting  deployment-quotas  1
dq-upstream-429              limiting  deployment-quotas  1
dq-day-hour-windows          limiting  dq-day             1
dq-layered-budgets           limiting  dq-day             1
dq-penalty-box               limiting  dq-day             1
dq-concurrency               limiting  dq-day             1
dq-delay                     limiting  dq-day             1
dq-slow-readers-cut          limiting  dq-day             1
tb-keepalive-counted         limiting  tb-hourly          1
tb-pipelined-crossing        limiting  tb-hourly          1
tb-tinymss-budget            limiting  tb-hourly          1
tb-ipv6-budget               limiting  tb-hourly          1
tb-admitted-fields           limiting  tb-hourly          1
tb-keepalive-refusal         limiting  tb-hourly          1
wire-restart-under-load      limiting  tb-hourly          1  crash
wire-upgrade-under-load      limiting  tb-hourly          1  restart
plumbing-impaired            plumbing  tb-small           1
plumbing-chromium            plumbing  tb-small           1
tb-impaired-charged-once     limiting  tb-small           1
tb-split-dribble             limiting  tb-small           1
tb-healthz-exempt            limiting  tb-small           1
tb-cors-preflight            limiting  tb-small           1
chromium-cors                limiting  tb-small           1
tb-syn-replay                limiting  tb-small           1
tb-stale-origin-segment      limiting  tb-small           1
ctl-status-stats             limiting  tb-small           1
ctl-prometheus-scrape        limiting  tb-small           1
ctl-reload                   limiting  tb-small           1
wire-overlap-decoy           limiting  tb-small           1
ctl-buckets-crash            limiting  tb-small           1  crash
ctl-buckets-relayout         limiting  tb-small           1  crash-edit=8
ctl-buckets-damaged          limiting  tb-small           1  crash-edit=16
wire-restart-parked-body     limiting  tb-small           1  crash
wire-restart-carry           limiting  tb-small           1  crash
wire-restart-mid-change      limiting  tb-small           1  crash-in-change=3
wire-restart-binding         limiting  tb-small           1  crash
wire-forged-adoption         limiting  tb-small           1
wire-forged-flood            limiting  tb-small           1
wire-blind-rst-new           limiting  tb-small           1
wire-blind-rst-judged        limiting  tb-small           1
wire-bad-checksum            limiting  tb-small           1
wire-ipv6-extension-chain    limiting  tb-small           1
wire-ipv4-options            limiting  tb-small           1
wire-unframable-response     limiting  tb-small           1
wire-ipv4-fragments          limiting  tb-small           1
tb-workers2-budget           limiting  tb-small           2
wire-af-xdp                  limiting  tb-small           1  args=--af-xdp,c1:o1
wire-ports-tap               limiting  tb-small           1  args=--ports-tap
wire-adopt-restart           limiting  tb-adopt           1  crash-edit=flows.table:8
wire-forged-adoption-on      limiting  tb-adopt           1
wire-fragment-in-target      limiting  tb-strict          1
wire-invalid-host            limiting  tb-strict          1
wire-host-key-spellings      limiting  tb-strict          1
wire-connect-with-content    limiting  tb-strict          1
wire-h2-preface-partial      limiting  tb-strict          1
wire-syn-flood               limiting  tb-strict          1
wire-syn-proxy-options       limiting  tb-strict          1
wire-unbound-refusal         limiting  tb-strict          1
wire-slow-head-crowd         limiting  tb-deadlines       1  args=--contexts,16,--contexts-per-client,4
logs-refusal-sample          limiting  tb-small           1  args=--refusal-log,4
replay-capture               limiting  tb-hourly          1
replay-nginx-log             limiting  tb-hourly          1
replay-capture-usage         limiting  deployment-quotas  1
wire-path-corpus             limiting  default-paths      1
wire-proxy-protocol          limiting  pp-strip           1
wire-proxy-protocol-keep     limiting  pp-keep            1
'

SLT_TB14_BODY='{"error":{"code":"rate_limited","message":"Too many requests. Slow down and retry."}}'
SLT_RF09_BODY='{"code":"meshery_cloud-3629","error":"Too many requests","severity":"alert","probableCause":["A client is calling this route family faster than normal use, for example a retry loop or a burst of replayed requests."],"suggestedRemediation":["Wait for the number of seconds in the Retry-After header, then retry. A client that is refused in normal use should pace its requests."]}'
SLT_RF10_BODY='{"code":"meshery_cloud-1001","error":"Unauthorized","severity":"error"}'
SLT_DQ07_BODY='{"error":{"type":"rate_limit_error","code":"rate_limited","message":"The upstream deployment'"'"'s per-minute quota is used up. Retry after the number of seconds in Retry-After, or switch to another model."}}'
SLT_PAGE_ORIGIN="http://198.18.0.20:8080"

# ================================================================ plumbing

# Curl and the Python client reach nginx over IPv4: small, large (1 MiB,
# Content-Length) and chunked bodies, request fields arrive unchanged, and
# the origin's log holds exactly the requests sent.
t_plumbing_ipv4() {
  local s code
  s="$(src4)"
  code="$(ccurl root --interface "$s" -H 'X-Slt-Test: plumbing-ipv4' "http://$ORIGIN4/")"
  check_eq "GET / status" "$code" 200
  check_eq "GET / body" "$(cbody root)" ok
  code="$(ccurl echo --interface "$s" -H 'X-Slt-Test: plumbing-ipv4' -H 'X-Forwarded-For: 198.19.7.7' \
    "http://$ORIGIN4/echo?q=1")"
  check_eq "GET /echo status" "$code" 200
  grep -qx 'x-forwarded-for=198.19.7.7' "$SLT_OUT/echo.body" || fail "/echo: X-Forwarded-For did not arrive unchanged: $(tr '\n' ' ' <"$SLT_OUT/echo.body")"
  grep -qx 'uri=/echo?q=1' "$SLT_OUT/echo.body" || fail "/echo: request target changed: $(tr '\n' ' ' <"$SLT_OUT/echo.body")"
  code="$(ccurl big --interface "$s" "http://$ORIGIN4/big")"
  check_eq "GET /big status" "$code" 200
  cmp -s "$SLT_OUT/big.body" "$SLT_TMP/nginx/www/big.bin" || fail "GET /big: body differs from the origin's file ($(stat -c %s "$SLT_OUT/big.body") bytes)"
  client chunked --source "$s" --path /chunked --count 2
  check_eq "python client /chunked" "$(res statuses chunked)" "200x2"
  check_eq "/chunked framing" "$(res expr chunked 'R[0]["framing"] if R else None')" chunked
  check_eq "/chunked body length" "$(res expr chunked 'R[0]["body_len"] if R else None')" \
    "$(sed 's/REPLACE/replaced/' "$SLT_TMP/nginx/www/chunked.txt" | wc -c)"
  check_eq "origin log lines from $s" "$(olog_count "$s")" 5
  finish
}

# The same over IPv6 (2001:db8::10 -> 2001:db8::20 through the appliance).
t_plumbing_ipv6() {
  local s code
  s="$(src6)"
  code="$(ccurl root6 -6 --interface "$s" "http://[$ORIGIN6]/")"
  check_eq "GET / over IPv6" "$code" 200
  check_eq "GET / body" "$(cbody root6)" ok
  code="$(ccurl big6 -6 --interface "$s" "http://[$ORIGIN6]/big")"
  check_eq "GET /big over IPv6" "$code" 200
  cmp -s "$SLT_OUT/big6.body" "$SLT_TMP/nginx/www/big.bin" || fail "GET /big over IPv6: body differs"
  client ka6 --host "$ORIGIN6" --source "$s" --count 5 --path '/v6/{i}'
  check_eq "keep-alive over IPv6" "$(res statuses ka6)" "200x5"
  check_eq "origin log lines from $s" "$(olog_count "$s")" 7
  finish
}

# Keep-alive: 20 requests on one connection all reach the origin, on one
# connection, in order.
t_plumbing_keepalive() {
  local s
  s="$(src4)"
  client ka --source "$s" --count 20 --path '/ka/{i}' -H 'X-Slt-Test: plumbing-keepalive'
  check_eq "statuses" "$(res statuses ka)" "200x20"
  check_eq "client exit status" "$CLIENT_RC" 0
  check_eq "origin log lines" "$(olog_count "$s")" 20
  check_eq "origin connections" "$(olog_lines "$s" | awk '{split($5, c, ":"); print c[1]}' | sort -u | wc -l)" 1
  check_eq "origin order" "$(olog_lines "$s" | awk '{print $3}' | tr '\n' ' ')" \
    "$(for i in $(seq 1 20); do printf '/ka/%d ' "$i"; done)"
  finish
}

# Pipelining: 20 requests in one write; the responses come back in order.
t_plumbing_pipelined() {
  local s
  s="$(src4)"
  client pl --source "$s" --count 20 --mode pipeline --path '/echo?i={i}'
  check_eq "statuses" "$(res statuses pl)" "200x20"
  check_eq "response order" "$(res expr pl '" ".join(r["body"].split("\n")[1] for r in R)')" \
    "$(for i in $(seq 1 20); do printf 'uri=/echo?i=%d ' "$i"; done | sed 's/ $//')"
  check_eq "origin log lines" "$(olog_count "$s")" 20
  check_eq "origin connections" "$(olog_lines "$s" | awk '{split($5, c, ":"); print c[1]}' | sort -u | wc -l)" 1
  finish
}

# Tiny MSS: the client's segments carry at most 88 bytes, so every request
# head is split across segments (and the origin's responses too); requests
# still arrive whole, pipelined and not, and a 1 MiB body is intact.
t_plumbing_tinymss() {
  local s pad segs0 segs1 mss code
  s="$(src4)"
  pad="$(printf 'p%.0s' $(seq 1 300))"
  mss_set 88 || { fail "could not set advmss 88 on the routes"; finish; }
  trap 'mss_clear' EXIT
  segs0="$(tcp_out_segs)"
  client tm-seq --source "$s" --count 10 --path '/tm/{i}' -H "X-Pad: $pad"
  client tm-pipe --source "$s" --count 10 --mode pipeline --path '/echo?i={i}' -H "X-Pad: $pad"
  segs1="$(tcp_out_segs)"
  check_eq "sequential statuses" "$(res statuses tm-seq)" "200x10"
  check_eq "pipelined statuses" "$(res statuses tm-pipe)" "200x10"
  mss="$(res end tm-seq 0 mss)"
  check_range "client's MSS" "$mss" 1 88
  # 20 heads of ~400 bytes in <= 88-byte segments: at least 100 segments.
  if [ -n "$segs0" ] && [ -n "$segs1" ]; then
    [ $((segs1 - segs0)) -ge 100 ] || fail "client sent only $((segs1 - segs0)) TCP segments for 20 ~400-byte heads: heads were not split"
  fi
  code="$(ccurl big --interface "$s" "http://$ORIGIN4/big")"
  check_eq "GET /big with MSS 88" "$code" 200
  cmp -s "$SLT_OUT/big.body" "$SLT_TMP/nginx/www/big.bin" || fail "GET /big with MSS 88: body differs"
  check_eq "origin log lines" "$(olog_count "$s")" 21
  finish
}

# Impairment (netem, or its userspace stand-in): 5% loss, 5% duplication, 25%
# reordering with 10 ms delay on the frames the client and the origin send
# into the appliance. 15 connections of one request and one of 10 pipelined
# requests: every request answered exactly once, the origin sees each once.
t_plumbing_impaired() {
  local s0 s1
  s0="$(src4 0)" s1="$(src4 1)"
  impair_on 5 5 25 10 || { fail "could not set up the impairment"; finish; }
  trap 'impair_off' EXIT
  client imp-conns --source "$s0" --connections 15 --count 1 --path '/imp/{c}' --timeout 60
  client imp-pipe --source "$s1" --count 10 --mode pipeline --path '/echo?i={i}' --timeout 60
  note "$(impair_stats | tr '\n' ';')"
  check_eq "15 connections" "$(res statuses imp-conns)" "$(printf '200 | %.0s' $(seq 1 14))200"
  check_eq "pipelined" "$(res statuses imp-pipe)" "200x10"
  check_eq "pipelined order" "$(res expr imp-pipe '" ".join(r["body"].split("\n")[1] for r in R)')" \
    "$(for i in $(seq 1 10); do printf 'uri=/echo?i=%d ' "$i"; done | sed 's/ $//')"
  check_eq "origin log lines (connections)" "$(olog_count "$s0")" 15
  check_eq "origin log lines (pipelined)" "$(olog_count "$s1")" 10
  [ "$(impair_events)" -gt 0 ] || fail "the impairment dropped or duplicated nothing ($(impair_stats | tr '\n' ';'))"
  finish
}

# ================================================================ three budgets

# TB01/TB14/TB15/TB16 under the shipped profile (bare 60/min, burst 60): 60
# bare GETs from one address on one kept-alive connection are admitted; the
# 61st within the second (on a new connection) is refused: 429, the TB14
# body, Retry-After 1 (TB15: the deficit is under a second), the 429's own
# RateLimit-* (TB16), and no Connection: close (after_answer: keep-alive,
# the shipped default: the connection stays open). The origin saw
# exactly the 60 (every line from the address counts, so a refused request
# that leaked even in part shows). One client process sends all 61 in a few
# tens of ms; a bare token refills every second, so the 61st must leave
# within a second of the first: a slower run is reported as such, not as
# the appliance's failure. (Counting across connections, pipelining, tiny
# MSS and IPv6 run under tb-hourly, where the refill cannot interfere.)
# RateLimit-* on admitted (origin) responses is not checked here:
# tb-admitted-fields does.
t_tb_bare_budget() {
  local s el
  s="$(src4)"
  client b --source "$s" -H 'X-Slt-Test: tb-bare-budget' \
    --plan '[{"count": 60, "path": "/tb/{i}"}, {"count": 1, "path": "/tb/61"}]'
  el="$(res summary b elapsed)"
  check_eq "TB01 60 admitted, then the 61st refused on a new connection" "$(res statuses b)" "200x60 | 429"
  check_eq "TB14 body" "$(res body b 61)" "$SLT_TB14_BODY"
  check_eq "TB14 Content-Type" "$(res header b 61 Content-Type)" application/json
  check_eq "TB15 Retry-After" "$(res header b 61 Retry-After)" 1
  check_eq "TB16 429 RateLimit-Limit" "$(res header b 61 RateLimit-Limit)" 60
  check_eq "TB16 429 RateLimit-Remaining" "$(res header b 61 RateLimit-Remaining)" 0
  check_range "TB16 429 RateLimit-Reset" "$(res header b 61 RateLimit-Reset)" 59 60
  check_eq "TB16 429 RateLimit-Policy" "$(res header b 61 RateLimit-Policy)" "60;w=60"
  check_eq "429 Connection (after_answer: keep-alive, the connection stays open)" "$(res header b 61 Connection)" ""
  check_olog "TB14 the 60 admitted reached the origin, the refused one did not" "$s" 60
  note "elapsed ${el}s"
  refill_hint b
  finish
}

# ================================================================ tb-hourly
# (three-budgets with the bare burst of 60 refilled per hour: no token comes
# back during a test, so every count is exact however slow the machine.)

# TB01/TB14: admitted requests are counted on kept-alive connections and
# across them: 30 on one connection and 30 on a second are all admitted, and
# the next one, on a third, is refused (had any of the 60 gone uncounted, it
# would be admitted). The 429's own TB16 fields say the budget is spent.
t_tb_keepalive_counted() {
  local s
  s="$(src4)"
  client k --source "$s" --plan '[{"count": 30, "path": "/ka/a{i}"}, {"count": 30, "path": "/ka/b{i}"}, {"count": 1, "path": "/ka/c"}]'
  check_eq "TB14 30 and 30 admitted, the third connection refused" "$(res statuses k)" "200x30 | 200x30 | 429"
  check_eq "TB14 body" "$(res body k 61)" "$SLT_TB14_BODY"
  check_eq "TB16 429 RateLimit-Remaining" "$(res header k 61 RateLimit-Remaining)" 0
  check_eq "TB16 429 RateLimit-Limit" "$(res header k 61 RateLimit-Limit)" 60
  check_olog "the 60 admitted, nothing of the refused one" "$s" 60
  check_eq "origin connections" "$(olog_lines "$s" | awk '{split($5, c, ":"); print c[1]}' | sort -u | wc -l)" 2
  finish
}

# TB14 on a pipelined batch that crosses the budget: 62 requests in one
# write (past the 32 a connection may have outstanding, so the appliance
# holds some back uncharged until responses return); the 60 admitted
# responses come back in order, then the two 429s on the same connection
# (kept open); neither refused request reaches the origin.
t_tb_pipelined_crossing() {
  local s
  s="$(src4)"
  client pl --source "$s" --count 62 --mode pipeline --path '/echo?i={i}'
  check_eq "statuses" "$(res statuses pl)" "200x60 429x2"
  check_eq "admitted in order" "$(res expr pl '" ".join(r["body"].split("\n")[1] for r in R if r["status"] == 200)')" \
    "$(for i in $(seq 1 60); do printf 'uri=/echo?i=%d ' "$i"; done | sed 's/ $//')"
  check_eq "TB14 body" "$(res body pl 61)" "$SLT_TB14_BODY"
  check_eq "TB16 429 RateLimit-Remaining" "$(res header pl 61 RateLimit-Remaining)" 0
  check_eq "TB14 the 62nd refused too, on the kept connection" "$(res header pl 62 RateLimit-Remaining)" 0
  check_eq "nothing unanswered" "$(res end pl 0 unanswered)" 0
  check_olog "the 60 admitted, nothing of the 61st or 62nd" "$s" 60
  check_eq "origin saw requests 1..60 on one connection" \
    "$(olog_lines "$s" | awk '{split($5, c, ":"); print c[2]}' | tr '\n' ' ')" "$(seq -s ' ' 1 60) "
  finish
}

# TB14 with heads split across segments (MSS 88, ~300-byte heads): the
# appliance holds a split head until it is complete; sequential and
# pipelined, the same 60 admitted and the 61st refused as with whole heads,
# and not one byte of the refused heads reaches the origin (nginx would log
# a partial request as a 400 line from the address). The pipelined 62nd
# refusal may close the connection ("429x2."): with 60 responses in flight
# as ~300-byte heads cross in tiny segments, the connection's edits can be
# all in use when it is decided, and then the answer closes it instead of
# keeping it open (dataplane/README.md, kept answers); either ending is the
# design's.
t_tb_tinymss_budget() {
  local s0 s1 pad
  s0="$(src4 0)" s1="$(src4 1)"
  pad="$(printf 'q%.0s' $(seq 1 200))"
  mss_set 88 || { fail "could not set advmss 88 on the routes"; finish; }
  trap 'mss_clear' EXIT
  client seq --source "$s0" --count 61 --path '/tm/{i}' -H "X-Pad: $pad"
  client pipe --source "$s1" --count 62 --mode pipeline --path '/echo?i={i}' -H "X-Pad: $pad"
  check_range "client's MSS" "$(res end seq 0 mss)" 1 88
  check_eq "sequential" "$(res statuses seq)" "200x60 429"
  check_eq "sequential TB14 body" "$(res body seq 61)" "$SLT_TB14_BODY"
  check_eq "sequential TB16 429 RateLimit-Remaining" "$(res header seq 61 RateLimit-Remaining)" 0
  check_re "pipelined" "$(res statuses pipe)" '^200x60 429x2\.?$'
  check_eq "pipelined TB14 body" "$(res body pipe 61)" "$SLT_TB14_BODY"
  check_eq "pipelined in order" "$(res expr pipe '" ".join(r["body"].split("\n")[1] for r in R if r["status"] == 200)')" \
    "$(for i in $(seq 1 60); do printf 'uri=/echo?i=%d ' "$i"; done | sed 's/ $//')"
  check_olog "sequential: the 60 admitted only" "$s0" 60
  check_olog "pipelined: the 60 admitted only" "$s1" 60
  finish
}

# TB01/TB14 over IPv6: 60 admitted from one IPv6 address, the 61st refused;
# another address of the same /64 (this profile keys whole /128 addresses,
# X03 off) has a whole budget of its own: 60 more admitted, then refused.
t_tb_ipv6_budget() {
  local s0 s1
  s0="$(src6 0)" s1="$(src6 1)"
  client v6 --host "$ORIGIN6" --source "$s0" --count 61 --path '/v6/{i}'
  client v6b --host "$ORIGIN6" --source "$s1" --count 61 --path '/v6/other{i}'
  check_eq "statuses" "$(res statuses v6)" "200x60 429"
  check_eq "TB14 body" "$(res body v6 61)" "$SLT_TB14_BODY"
  check_eq "TB16 429 RateLimit-Remaining" "$(res header v6 61 RateLimit-Remaining)" 0
  check_eq "another /128 has a whole budget of its own" "$(res statuses v6b)" "200x60 429"
  check_olog "first address" "$s0" 60
  check_olog "second address" "$s1" 60
  finish
}

# ================================================================ route families

# RF03/RF05/RF07/RF09: the anonymous results token is counted by address
# (RF05); blowhorn_health (burst 30, 1/s) admits 30 back to back and refuses
# the 31st with the MeshKit body and Retry-After 1, no RateLimit-* fields
# (header_style none). RF01: another family (capabilities, RF11 by address)
# is not refused; RF02: a path outside the families is not limited.
t_rf_blowhorn_budget() {
  local s auth='Authorization: Bearer meshery-results-anonymous'
  s="$(src4)"
  client bh --source "$s" --count 31 --path /api/blowhorn/health -H "$auth"
  client cap --source "$s" --count 1 --path /capabilities -H "$auth"
  client free --source "$s" --count 1 --path /not/a/family -H "$auth"
  check_eq "RF07 30 admitted, the 31st refused" "$(res statuses bh)" "200x30 429"
  check_eq "RF09 body" "$(res body bh 31)" "$SLT_RF09_BODY"
  check_eq "RF09 Retry-After" "$(res header bh 31 Retry-After)" 1
  check_eq "no RateLimit-Limit on the 429 (header_style none)" "$(res has-header bh 31 RateLimit-Limit)" no
  check_eq "no RateLimit-Remaining on admitted responses" "$(res has-header bh 1 RateLimit-Remaining)" no
  check_eq "RF01 another family still admitted" "$(res statuses cap)" 200
  check_eq "RF02 outside the families" "$(res statuses free)" 200
  check_eq "origin log lines" "$(olog_count "$s")" 32
  refill_hint bh
  finish
}

# RF06: CF-Connecting-IP (then X-Real-IP) names the client, from anyone
# (trusted_proxies is 0.0.0.0/0 in the shipped profile): two header addresses
# behind one connection address have separate budgets, and the connection's
# own address a third.
t_rf_client_ip_headers() {
  local s auth='Authorization: Bearer meshery-results-anonymous'
  s="$(src4)"
  # One process: blowhorn_health refills a token every second.
  client h --source "$s" --path /api/blowhorn/health -H "$auth" --plan '[
    {"count": 31, "headers": ["CF-Connecting-IP: 198.19.6.1"]},
    {"count": 1, "headers": ["CF-Connecting-IP: 198.19.6.2"]},
    {"count": 1, "headers": ["X-Real-IP: 198.19.6.1"]},
    {"count": 1}]'
  # CF .1 x31 | CF .2: its own budget | X-Real-IP .1: shares .1's | no header: the connection's own
  check_eq "RF06 budgets per header address" "$(res statuses h)" "200x30 429 | 200 | 429 | 200"
  check_eq "origin log lines" "$(olog_count "$s")" 32
  refill_hint h
  finish
}

# RF10: a family keyed by user, with no credential or one the credential map
# does not know, gets the 401 before any rate check, from the appliance; the
# origin never sees it.
t_rf_unknown_credential() {
  local s
  s="$(src4)"
  client none --source "$s" --count 1 --path /api/claims
  client unknown --source "$s" --count 1 --path /api/claims -H 'Authorization: Bearer not-a-known-token'
  check_eq "no credential" "$(res statuses none)" "401"
  check_eq "RF10 body" "$(res body none 1)" "$SLT_RF10_BODY"
  check_eq "unknown credential" "$(res statuses unknown)" "401"
  check_eq "origin log lines" "$(olog_count "$s")" 0
  finish
}

# ================================================================ deployment quotas

# DQ01-DQ04/DQ06-DQ08/DQ10: claude-sonnet-us-2's quota is 300 requests per
# calendar minute: 300 admitted, the 301st refused with the gateway body,
# Retry-After = seconds to the next full UTC minute, a trace id, no
# RateLimit-* fields anywhere; another deployment and a request naming none
# still pass; the quota belongs to the deployment, not the address.
t_dq_rpm_quota() {
  local s0 s1 sec before after lo hi ra dep='X-Pi-Deployment: claude-sonnet-us-2'
  s0="$(src4 0)" s1="$(src4 1)"
  # DQ03: counters reset at each full minute; keep the run inside one.
  sec="$(date -u +%-S)"
  if [ "$sec" -ge 45 ]; then
    note "waiting $((61 - sec)) s for the next minute"
    sleep $((61 - sec))
  fi
  before="$(now_s)"
  client q --source "$s0" --count 301 --path '/dq/{i}' -H "$dep"
  after="$(now_s)"
  client other --source "$s0" --count 1 --path /dq/other -H 'X-Pi-Deployment: gpt-4o-mini-eu-1'
  client nodep --source "$s0" --count 1 --path /dq/none
  client addr2 --source "$s1" --count 1 --path /dq/addr2 -H "$dep"
  check_eq "DQ04 300 admitted, the 301st refused" "$(res statuses q)" "200x300 429"
  check_eq "DQ07 body" "$(res body q 301)" "$SLT_DQ07_BODY"
  ra="$(res header q 301 Retry-After)"
  # Seconds to the next full minute, between the run's start and end (+-1 s).
  lo="$("$SLT_PY" -c "import math; print(max(1, math.ceil(60 - $after % 60) - 1))")"
  hi="$("$SLT_PY" -c "import math; print(min(60, math.ceil(60 - $before % 60) + 1))")"
  check_range "DQ07 Retry-After (to the next minute)" "$ra" "$lo" "$hi"
  check_re "DQ07 X-Pi-Trace-Id" "$(res header q 301 X-Pi-Trace-Id)" '^[^[:space:]]+$'
  check_eq "DQ10 no RateLimit-* on any response" \
    "$(res expr q 'sum(1 for r in R for h in r["headers"] if h.startswith("ratelimit"))')" 0
  check_eq "DQ06 another deployment" "$(res statuses other)" 200
  check_eq "DQ01 no deployment named: not limited" "$(res statuses nodep)" 200
  check_eq "DQ01 the quota is the deployment's, not the address's" "$(res statuses addr2)" "429"
  check_eq "DQ08 origin log lines for claude-sonnet-us-2" \
    "$(olog_count "$s0" '$8 == "claude-sonnet-us-2"')" 300
  check_olog "DQ08 the 300, the other deployment's and the one naming none; nothing of the 301st" "$s0" 302
  check_olog "DQ08 nothing from the second address" "$s1" 0
  finish
}

# Hour and day windows on the wire, with curl: a day quota at UTC+05:30
# holds 3 requests for the rest of that day (Retry-After counts down to
# 18:30 UTC), an hour quota at UTC 2 until the full hour, a rate of 2/day
# refills one request every 12 hours; the refusals are problem details
# naming the exhausted budget, the admissions carry draft-11 fields of the
# window's length. Nothing refused reaches the origin.
t_dq_day_hour_windows() {
  local s i code before after lo hi body
  s="$(src4 0)"
  before="$(date +%s)"
  for i in 1 2 3 4; do
    code="$(ccurl day$i --interface "$s" -H 'X-Pi-Deployment: day-test' "http://$ORIGIN4/day/$i")"
    note "day request $i: $code"
  done
  after="$(date +%s)"
  for i in 1 2 3; do
    check_eq "day request $i admitted" "$(sed -n '1s/^HTTP[^ ]* \([0-9]*\).*/\1/p' "$SLT_OUT/day$i.headers")" 200
  done
  check_eq "day quota: draft-11 policy field, a day long" "$(chdr day1 RateLimit-Policy)" '"per-day";q=3;w=86400'
  check_eq "day quota: the 4th refused" "$code" 429
  check_eq "day quota refusal: problem details" "$(chdr day4 Content-Type)" application/problem+json
  body="$(cbody day4)"
  check_eq "day quota refusal: the problem type" \
    "$("$SLT_PY" -c 'import json,sys; print(json.loads(sys.argv[1])["type"])' "$body")" \
    "https://iana.org/assignments/http-problem-types#quota-exceeded"
  check_eq "day quota refusal: the exhausted budget named" \
    "$("$SLT_PY" -c 'import json,sys; d = json.loads(sys.argv[1]); print(d["violated-policies"], d["status"])' "$body")" \
    "['per-day'] 429"
  # Seconds to the next 18:30 UTC (midnight at +05:30), +-1 s around the run.
  lo="$("$SLT_PY" -c "print(86400 - ($after + 19800) % 86400 - 1)")"
  hi="$("$SLT_PY" -c "print(86400 - ($before + 19800) % 86400 + 1)")"
  check_range "day quota: Retry-After to midnight at +05:30" "$(chdr day4 Retry-After)" "$lo" "$hi"
  check_eq "day quota: another deployment has its own day" \
    "$(ccurl other --interface "$s" -H 'X-Pi-Deployment: other' "http://$ORIGIN4/day/other")" 200

  for i in 1 2 3; do
    code="$(ccurl hour$i --interface "$s" "http://$ORIGIN4/hour/$i")"
  done
  after="$(date +%s)"
  check_eq "hour quota: the 3rd refused" "$code" 429
  check_eq "hour quota: w= an hour" "$(chdr hour1 RateLimit-Policy)" '"per-hour";q=2;w=3600'
  lo="$("$SLT_PY" -c "print(3600 - $after % 3600 - 1)")"
  hi="$("$SLT_PY" -c "print(3600 - $before % 3600 + 1)")"
  check_range "hour quota: Retry-After to the full hour" "$(chdr hour3 Retry-After)" "$lo" "$hi"
  check_eq "hour quota refusal names its budget" \
    "$("$SLT_PY" -c 'import json,sys; print(json.loads(sys.argv[1])["violated-policies"])' "$(cbody hour3)")" "['per-hour']"

  for i in 1 2 3; do
    code="$(ccurl rate$i --interface "$s" "http://$ORIGIN4/rate/$i")"
  done
  check_eq "2/day: the 3rd refused" "$code" 429
  check_range "2/day: Retry-After half a day" "$(chdr rate3 Retry-After)" 43190 43200
  check_eq "2/day: w= a day" "$(chdr rate1 RateLimit-Policy)" '"daily-rate";q=2;w=86400'

  check_eq "the origin saw the 8 admitted, nothing refused" \
    "$(olog_count "$s")" 8
  finish
}

# Layered budgets on the wire, with curl: a rule charging an hour window of
# 5 and a rate of 2 an hour, all or none. Two admitted; the next four are
# refused by the rate, each a problem naming it, Retry-After its 30 minutes,
# and the window charged for none of them (its RateLimit item still says 3
# left, where counting the refusals would leave 0). The origin sees two.
t_dq_layered_budgets() {
  local s i code
  s="$(src4 0)"
  for i in 1 2 3 4 5 6; do
    code="$(ccurl layered$i --interface "$s" "http://$ORIGIN4/layered/$i")"
    note "layered request $i: $code"
  done
  check_eq "layered: both budgets listed, the fewest left first" "$(chdr layered1 RateLimit-Policy)" \
    '"l-rate";q=2;w=3600, "l-window";q=5;w=3600'
  check_eq "layered: the 2nd admitted" "$(sed -n '1s/^HTTP[^ ]* \([0-9]*\).*/\1/p' "$SLT_OUT/layered2.headers")" 200
  check_eq "layered: the 6th refused" "$code" 429
  check_range "layered: Retry-After the rate's wait" "$(chdr layered6 Retry-After)" 1795 1800
  check_re "layered: the window gave back the refusals' charges" "$(chdr layered6 RateLimit)" \
    '^"l-rate";r=0;t=[0-9]+, "l-window";r=3;t=[0-9]+$'
  check_eq "layered: the problem names the exhausted budget" \
    "$("$SLT_PY" -c 'import json,sys; print(json.loads(sys.argv[1])["violated-policies"])' "$(cbody layered6)")" \
    "['l-rate']"
  check_eq "layered: the origin saw the 2 admitted" "$(olog_count "$s")" 2
  finish
}

# The penalty box on the wire: a rule of 2 an hour per address boxes a key
# for an hour after 3 refusals within the hour. The 3rd refusal boxes it:
# its next request is refused for the box's hour (Retry-After about 3600,
# not the bucket's 1800), sluicectl penalty list shows it, and the
# counters say so. Abuse: 100 forged segments with a victim's address and
# no handshake, each a head for /boxed/, charge and box nothing: the
# victim's own 2 requests are admitted. Released by sluicectl, the key is
# refused by its bucket again (Retry-After 1800), no longer by the box.
t_dq_penalty_box() {
  local s victim i code before after listed mac
  s="$(src4 0)" victim="$(src4 1)"
  before="$(SLT_CTL --json stats)"
  for i in 1 2 3 4 5 6; do
    code="$(ccurl boxed$i --interface "$s" "http://$ORIGIN4/boxed/$i")"
    note "boxed request $i: $code $(chdr boxed$i Retry-After)"
  done
  check_eq "penalty: 2 admitted" "$(sed -n '1s/^HTTP[^ ]* \([0-9]*\).*/\1/p' "$SLT_OUT/boxed2.headers")" 200
  check_range "penalty: refused by the bucket first" "$(chdr boxed3 Retry-After)" 1790 1800
  check_range "penalty: then by the box, for its hour" "$(chdr boxed6 Retry-After)" 3590 3600
  sleep 0.3  # the control thread reads the workers' boxings every 100 ms
  listed="$(SLT_CTL penalty list)"
  note "penalty list: $listed"
  check_re "penalty list: the key, its rule, about an hour left" "$(grep -F " $s " <<<"$listed")" \
    "^boxed +$s +[0-9]+ s +3[56][0-9][0-9] s$"
  after="$(SLT_CTL --json stats)"
  check_eq "penalty: one key boxed" "$(delta_of "$before" "$after" penalty_boxed)" 1
  check_eq "penalty: one request refused while boxed" "$(delta_of "$before" "$after" penalty_refused)" 1

  mac="$(ip -n "$NS_ORG" -br link show o0 | awk '{ print $3 }')"
  ip netns exec "$NS_CLI" timeout -k 2 20 "$SLT_PY" "$SLT_HERE/forge.py" adopt --iface c0 --dst-mac "$mac" \
    --dst "$ORIGIN4" --src "$victim" --count 100 --seconds 1 --spread --path '/boxed/forged{i}' >"$SLT_OUT/forge.json" 2>&1
  note "forged: $(cat "$SLT_OUT/forge.json")"
  sleep 0.3
  for i in 1 2; do
    code="$(ccurl victim$i --interface "$victim" "http://$ORIGIN4/boxed/victim$i")"
    check_eq "penalty: the victim's own request $i after the forgery" "$code" 200
  done
  check_eq "penalty: nothing boxed for the forged segments" \
    "$(delta_of "$after" "$(SLT_CTL --json stats)" penalty_boxed)" 0

  check_re "penalty release" "$(SLT_CTL penalty release boxed "$s")" "^released $s from rule boxed's penalty box$"
  check_eq "penalty list after the release" "$(SLT_CTL penalty list)" "no key is in a penalty box"
  code="$(ccurl released --interface "$s" "http://$ORIGIN4/boxed/released")"
  check_eq "penalty: released, still refused by its bucket" "$code" 429
  check_range "penalty: the bucket's wait, not the box's" "$(chdr released Retry-After)" 1700 1800
  check_eq "penalty release of a key not boxed" "$(SLT_CTL penalty release boxed 198.18.9.9)" \
    "198.18.9.9 was not in rule boxed's penalty box"
  check_re "penalty release on a rule without a box: a clear error" "$(SLT_CTL penalty release layered "$s" 2>&1)" \
    "rule layered has no penalty box"
  check_eq "the origin saw the 4 admitted, nothing forged" "$(( $(olog_count "$s") + $(olog_count "$victim") ))" 4
  finish
}

# In-flight requests per key on the wire (concurrency: 2 on /big, 1 MiB):
# two slow readers from one address ask for it and read nothing, so both
# responses stay in flight. A third request from that address is refused
# with draft-11's concurrent-requests fields; another address is not. The
# first reader's reset gives its slot back: the next request is answered
# whole. Once every response has ended (the second reader's reset, then
# requests read to the end), requests one after another never meet the
# limit. The abuse the limit invites, slow readers holding a shared key's
# slots, lasts only as long as their connections: a reset, the flow's end
# or its eviction gives the slots back.
t_dq_concurrency() {
  local s other code before after i
  s="$(src4 0)" other="$(src4 1)"
  before="$(SLT_CTL --json stats)"
  ip netns exec "$NS_CLI" timeout -k 2 40 "$SLT_PY" "$SLT_HERE/slow_readers.py" --host "$ORIGIN4" --source "$s" \
    --path /big --hold 3,6 >"$SLT_OUT/readers.json" 2>&1 &
  local readers=$!
  sleep 1
  code="$(ccurl third --interface "$s" "http://$ORIGIN4/big")"
  check_eq "concurrency: a third request while two are in flight" "$code" 429
  check_eq "concurrency: draft-11 fields" "$(chdr third RateLimit-Policy)" '"concurrent/concurrency";q=2;qu="concurrent-requests"'
  check_eq "concurrency: Retry-After" "$(chdr third Retry-After)" 1
  check_eq "concurrency: another address" "$(ccurl other --interface "$other" "http://$ORIGIN4/big")" 200
  check_eq "concurrency: the other address got the whole response" "$(stat -c %s "$SLT_OUT/other.body")" 1048576
  sleep 2.5  # the first reader resets at 3 s
  code="$(ccurl after-reset --interface "$s" "http://$ORIGIN4/big")"
  check_eq "concurrency: a slot back after the first reader's reset" "$code" 200
  check_eq "concurrency: answered whole" "$(stat -c %s "$SLT_OUT/after-reset.body")" 1048576
  wait "$readers"
  note "readers: $(tr '\n' ' ' <"$SLT_OUT/readers.json")"
  for i in 1 2 3 4; do
    code="$(ccurl seq$i --interface "$s" "http://$ORIGIN4/big")"
    check_eq "concurrency: request $i after every response ended" "$code" 200
  done
  after="$(SLT_CTL --json stats)"
  check_eq "concurrency: refusals counted" "$(delta_of "$before" "$after" in_flight_refused)" 1
  finish
}

# The abuse concurrency invites: slow readers holding a key's slots. Two
# connections from one address ask for /big (1 MiB; concurrency 2) and
# read nothing for 8 s: a third request is refused while they hold both
# slots, but deadlines.response (3 s in this policy) cuts each reader once
# it has read nothing for that long (both ends reset), which gives the
# slots back: the next request, a few seconds later, is answered whole.
t_dq_slow_readers_cut() {
  local s code before after readers
  s="$(src4 0)"
  before="$(SLT_CTL --json stats)"
  ip netns exec "$NS_CLI" timeout -k 2 40 "$SLT_PY" "$SLT_HERE/slow_readers.py" --host "$ORIGIN4" --source "$s" \
    --path /big --hold 8,8 >"$SLT_OUT/readers.json" 2>&1 &
  readers=$!
  sleep 1
  check_eq "slow readers: a third request while they hold both slots" "$(ccurl third --interface "$s" "http://$ORIGIN4/big")" 429
  # The deadline (3 s of reading nothing) cuts them about 3 s after they
  # stopped reading: waited for by the count, at most 10 s, not a fixed sleep
  # that a slow start of the readers outruns.
  local waited=0
  while [ "$(delta_of "$before" "$(SLT_CTL --json stats)" deadline_response)" -lt 2 ] && [ "$waited" -lt 100 ]; do
    sleep 0.1
    waited=$((waited + 1))
  done
  note "both readers cut $((waited / 10)).$((waited % 10)) s after the third request"
  code="$(ccurl after --interface "$s" "http://$ORIGIN4/big")"
  check_eq "slow readers: cut by deadlines.response, their slots back" "$code" 200
  check_eq "slow readers: the next one answered whole" "$(stat -c %s "$SLT_OUT/after.body")" 1048576
  after="$(SLT_CTL --json stats)"
  check_eq "slow readers: both cut, counted" "$(delta_of "$before" "$after" deadline_response)" 2
  wait "$readers"
  note "readers: $(tr '\n' ' ' <"$SLT_OUT/readers.json")"
  finish
}

# Delay instead of refusal on the wire (2 a second, one back to back,
# delay_max 1.5 s, at most 2 waiting per key). Four requests at once from
# one address: one goes at once, two are held and reach the origin about
# 0.5 s and 1 s later (never earlier: the origin's log times them), the
# fourth would wait 1.5 s with two already waiting and is refused. The
# abuse, one key filling the delay queue: that key holds at most its 2,
# and another address meanwhile is admitted at once, then delayed on its
# own bucket. A POST whose body follows its delayed head is answered once
# the client sends the body again. sluicectl stats counts the delays.
t_dq_delay() {
  local s other poster before after i codes t
  s="$(src4 0)" other="$(src4 1)" poster="$(src4 2)"
  before="$(SLT_CTL --json stats)"
  for i in 1 2 3 4; do
    ccurl delay$i --interface "$s" "http://$ORIGIN4/delay/$i" >"$SLT_OUT/delay$i.code" &
  done
  sleep 0.2
  check_eq "delay: another address meanwhile, at once" "$(ccurl other1 --interface "$other" "http://$ORIGIN4/delay/o1")" 200
  check_eq "delay: its second waits on its own bucket" "$(ccurl other2 --interface "$other" "http://$ORIGIN4/delay/o2")" 200
  wait
  codes="$(cat "$SLT_OUT"/delay[1-4].code | tr -d ' ' | fold -w3 | sort | tr '\n' ' ')"
  check_eq "delay: one at once, two late, one refused" "$codes" "200 200 200 429 "
  for i in 1 2 3 4; do
    [ "$(cat "$SLT_OUT/delay$i.code")" = 429 ] || continue
    check_range "delay: the refused one's Retry-After" "$(chdr delay$i Retry-After)" 1 2
  done
  olog_settle
  t="$(olog_lines "$s" | awk '$3 ~ /^\/delay\// { print $9 }' | sort -n | tr '\n' ' ')"
  note "origin times: $t"
  check_eq "delay: the origin saw the 3 admitted" "$(wc -w <<<"$t")" 3
  check_eq "delay: spaced by the bucket's interval, never earlier" \
    "$(awk '{ ok = ($2 - $1 >= 0.45 && $2 - $1 <= 0.8 && $3 - $2 >= 0.45 && $3 - $2 <= 0.8); print ok ? "yes" : "no: " $0 }' <<<"$t")" yes
  t="$(olog_lines "$other" | awk '$3 ~ /^\/delay\// { print $9 }' | sort -n | tr '\n' ' ')"
  check_eq "delay: the other address's second held about 0.5 s" \
    "$(awk '{ d = $2 - $1; print (d >= 0.4 && d <= 0.8) ? "yes" : "no: " d }' <<<"$t")" yes

  head -c 3000 /dev/zero | tr '\0' x >"$SLT_OUT/post.body.in"
  check_eq "delay: a POST at once" "$(ccurl post1 --interface "$poster" -H Expect: --data-binary @"$SLT_OUT/post.body.in" \
    "http://$ORIGIN4/delay/post1")" 200
  check_eq "delay: a POST held, its body sent again" "$(ccurl post2 --interface "$poster" -H Expect: \
    --data-binary @"$SLT_OUT/post.body.in" "http://$ORIGIN4/delay/post2")" 200
  # nginx answers a `return` before it has read the body, and logs the
  # request once the body is in: the client's retransmission of it.
  for i in 1 2 3 4 5 6 7 8 9 10; do
    [ "$(olog_count "$poster")" -ge 2 ] && break
    sleep 0.3
  done
  check_eq "delay: the origin read both POSTs whole" "$(olog_count "$poster")" 2
  after="$(SLT_CTL --json stats)"
  check_eq "delay: counted" "$(delta_of "$before" "$after" delayed)" 4
  check_range "delay: time held, in microseconds" "$(delta_of "$before" "$after" delay_us_total)" 2200000 2500000
  check_eq "delay: none refused for want of room" "$(delta_of "$before" "$after" delay_full)" 0
  finish
}

# ================================================================ pp-strip, pp-keep
# A real load balancer in front: HAProxy at 198.18.0.250 in the client
# namespace, in TCP mode (as a TLS terminator or a cloud balancer is to
# HTTP), relaying each client to the origin behind the appliance with a
# PROXY protocol header: v2 on 8080, v1 on 8082. `pp_lb_start PORT` points
# both at the origin's PORT; the trap stops it (by its PID) and takes its
# address away, however the test ends.
SLT_LB=198.18.0.250
pp_lb_start() {
  local port="$1" i
  ip -n "$NS_CLI" addr add "$SLT_LB/24" dev c0 || { fail "cannot add the balancer's address"; finish; }
  trap 'pp_lb_stop' EXIT
  cat >"$SLT_OUT/haproxy.cfg" <<CFG
global
  maxconn 200
defaults
  mode tcp
  timeout connect 5s
  timeout client 30s
  timeout server 30s
frontend v2
  bind $SLT_LB:8080
  default_backend origin_v2
frontend v1
  bind $SLT_LB:8082
  default_backend origin_v1
backend origin_v2
  server origin $ORIGIN4:$port send-proxy-v2 source $SLT_LB
backend origin_v1
  server origin $ORIGIN4:$port send-proxy source $SLT_LB
CFG
  ip netns exec "$NS_CLI" haproxy -db -f "$SLT_OUT/haproxy.cfg" >"$SLT_OUT/haproxy.log" 2>&1 &
  SLT_LB_PID=$!
  for ((i = 0; i < 50; i++)); do
    ip netns exec "$NS_CLI" ss -ltn | grep -q "$SLT_LB:8082" && return 0
    sleep 0.1
  done
  fail "haproxy did not listen: $(tail -5 "$SLT_OUT/haproxy.log")"
  finish
}
pp_lb_stop() {
  if [ -n "${SLT_LB_PID:-}" ]; then
    kill "$SLT_LB_PID" 2>/dev/null
    wait "$SLT_LB_PID" 2>/dev/null
  fi
  ip -n "$NS_CLI" addr del "$SLT_LB/24" dev c0 2>/dev/null
  return 0
}

# The PROXY protocol, stripped (client_ip proxy_protocol: strip, 2 an hour
# per client): through the balancer, each client is charged by its own
# address, whichever version the balancer speaks: a 3rd request of one
# client (v2) is refused, another's (v1) are admitted; the origin, which
# does not read the protocol, gets plain HTTP (its log shows the balancer
# as the peer and every request it got). The first client, calling the
# origin directly, finds its budget spent: one budget, however it comes.
# The abuse: a client sending its own header (curl --haproxy-protocol)
# straight to the origin is reset, as is the balancer's address without a
# header; neither reaches the origin.
t_wire_proxy_protocol() {
  local a b i code before after
  a="$(src4 0)" b="$(src4 1)"
  pp_lb_start 80
  before="$(SLT_CTL --json stats)"
  for i in 1 2 3; do
    code="$(ccurl a$i --interface "$a" "http://$SLT_LB:8080/pp/a$i")"
    note "a$i (v2): $code"
    [ "$i" -lt 3 ] && check_eq "client a's request $i through the balancer (v2)" "$code" 200
  done
  check_eq "client a's 3rd: its own budget spent" "$code" 429
  check_range "client a's refusal: Retry-After" "$(chdr a3 Retry-After)" 1700 1800
  check_re "client a's refusal names its budget" "$(chdr a3 RateLimit)" '^"per-client";r=0;t=3[56][0-9][0-9]$'
  for i in 1 2; do
    check_eq "client b's request $i through the balancer (v1): a budget of its own" \
      "$(ccurl b$i --interface "$b" "http://$SLT_LB:8082/pp/b$i")" 200
  done
  check_eq "client a straight to the origin: the same budget, spent" \
    "$(ccurl direct --interface "$a" "http://$ORIGIN4/pp/direct")" 429
  code="$(ccurl smuggled --interface "$b" --haproxy-protocol "http://$ORIGIN4/pp/smuggled")"
  check_eq "a client's own PROXY header: reset" "$code" 000
  code="$(ccurl bare --interface "$SLT_LB" "http://$ORIGIN4/pp/bare")"
  check_eq "the balancer's address without a header: reset" "$code" 000
  after="$(SLT_CTL --json stats)"
  check_eq "headers read" "$(delta_of "$before" "$after" proxy_headers)" 5
  check_eq "untrusted headers counted" "$(delta_of "$before" "$after" proxy_untrusted)" 1
  check_eq "missing headers counted" "$(delta_of "$before" "$after" proxy_missing)" 1
  check_eq "the origin saw the 4 admitted, from the balancer" "$(olog_count "$SLT_LB")" 4
  check_eq "the origin saw nothing from the clients themselves" "$(($(olog_count "$a") + $(olog_count "$b")))" 0
  check_eq "the origin read plain HTTP (no 400)" "$(olog_count "$SLT_LB" '$4 == 400')" 0
  finish
}

# The PROXY protocol kept (proxy_protocol: keep) for an origin that reads
# it (nginx's proxy_protocol listener, which answers with the address the
# header named): the header reaches it unchanged, v2 and v1, and names the
# client the appliance charged.
t_wire_proxy_protocol_keep() {
  local a b
  a="$(src4 0)" b="$(src4 1)"
  pp_lb_start 8081
  check_eq "through the balancer (v2): admitted" "$(ccurl k1 --interface "$a" "http://$SLT_LB:8080/k1")" 200
  check_eq "the origin read the header: the client's address" "$(cbody k1)" "client=$a"
  check_eq "v1: admitted" "$(ccurl k2 --interface "$b" "http://$SLT_LB:8082/k2")" 200
  check_eq "v1: the origin read the header" "$(cbody k2)" "client=$b"
  check_eq "client a's 2nd" "$(ccurl k3 --interface "$a" "http://$SLT_LB:8082/k3")" 200
  check_eq "client a's 3rd: refused by its own budget" "$(ccurl k4 --interface "$a" "http://$SLT_LB:8080/k4")" 429
  finish
}

# ================================================================ tb-small
# (three-budgets with bare 20/hour and credential 4/hour, the page origin
# granted: no refill during a test, so every count is exact however slow.)

# Design decision 2 ("a request is charged once, however often its segments
# are retransmitted") and TB14 under 5% loss, 5% duplication and 25%
# reordering: 30 connections of one request each are each answered exactly
# once: exactly 20 admitted, 10 refused (closed); the origin saw the 20.
# Then a pipelined batch of 25 on one connection: 20 admitted in order, the
# 429, the close.
t_tb_impaired_charged_once() {
  local s0 s1
  s0="$(src4 0)" s1="$(src4 1)"
  impair_on 5 5 25 10 || { fail "could not set up the impairment"; finish; }
  trap 'impair_off' EXIT
  client conns --source "$s0" --connections 30 --count 1 --path '/imp/{c}' --timeout 90
  client pipe --source "$s1" --count 25 --mode pipeline --path '/echo?i={i}' --timeout 60
  note "$(impair_stats | tr '\n' ';')"
  check_eq "every connection answered exactly once" \
    "$(res expr conns 'sum(1 for e in E if e.get("answered") == 1 and not e.get("error"))')" 30
  check_eq "admitted" "$(res count conns 200)" 20
  check_eq "refused" "$(res count conns 429)" 10
  check_eq "refusals closed" "$(res expr conns 'sum(1 for r in R if r["status"] == 429 and r["closed"])')" 10
  check_olog "origin log (connections): the 20 admitted, once each" "$s0" 20
  check_eq "origin saw each admitted path once" "$(olog_lines "$s0" | awk '{print $3}' | sort | uniq -d | wc -l)" 0
  check_eq "pipelined" "$(res statuses pipe)" "200x20 429."
  check_eq "pipelined order" "$(res expr pipe '" ".join(r["body"].split("\n")[1] for r in R if r["status"] == 200)')" \
    "$(for i in $(seq 1 20); do printf 'uri=/echo?i=%d ' "$i"; done | sed 's/ $//')"
  check_olog "origin log (pipelined)" "$s1" 20
  [ "$(impair_events)" -gt 0 ] || fail "the impairment dropped or duplicated nothing ($(impair_stats | tr '\n' ';'))"
  finish
}

# TB14 with heads dribbled: each request written 5 bytes at a time, 2 ms
# apart (every piece its own segment, so the appliance holds each head until
# its last piece): 20 admitted, the 21st refused; the same with a pipelined
# batch written 7 bytes at a time. Not one byte of a refused head reaches the
# origin: nginx would log a partial request as a 400 line from the address.
t_tb_split_dribble() {
  local s0 s1
  s0="$(src4 0)" s1="$(src4 1)"
  client seq --source "$s0" --count 21 --path '/dr/{i}' --piece 5 --piece-delay 2 --timeout 40
  client pipe --source "$s1" --count 22 --mode pipeline --path '/echo?i={i}' --piece 7 --piece-delay 1 --timeout 40
  check_eq "sequential" "$(res statuses seq)" "200x20 429."
  check_eq "sequential TB14 body" "$(res body seq 21)" "$SLT_TB14_BODY"
  check_eq "sequential TB16 429 RateLimit-Remaining" "$(res header seq 21 RateLimit-Remaining)" 0
  check_eq "pipelined" "$(res statuses pipe)" "200x20 429."
  check_eq "pipelined TB14 body" "$(res body pipe 21)" "$SLT_TB14_BODY"
  check_olog "sequential: the 20 admitted only" "$s0" 20
  check_olog "pipelined: the 20 admitted only" "$s1" 20
  finish
}

# TB18: GET and HEAD on exactly /healthz are never limited and carry no
# RateLimit-* fields, even out of budget; any other method, or a path under
# it, is limited. TB14/TB15 as curl sees them: the 429 body, Retry-After
# (a bare token every 180 s here), Connection: close.
# sluicectl and the Prometheus endpoint against the running appliance:
# status and policy show name the
# policy, policy check accepts a good file and refuses a broken one with its
# line and column; the
# counters `stats` reports move by exactly what a client did (TB01: 5 bare
# requests admitted, then the budget's 429); an unprivileged user cannot use
# the control socket (exit 3, permission denied); bad use is exit 2.
t_ctl_status_stats() {
  local s ctl before after out rc
  s="$(src4)"
  ctl="$(dirname "$SLUICED")/sluicectl"
  [ -x "$ctl" ] || { fail "sluicectl not built next to sluiced ($ctl)"; finish; }
  out="$("$ctl" --socket "$SLT_TMP/control.sock" status 2>&1)"
  check_eq "status names the policy" "$(grep -o "^policy    three-budgets-small" <<<"$out")" "policy    three-budgets-small"
  local scrape_before scrape_after
  scrape() { ip netns exec "$NS_BOX" curl -sS --max-time 5 "http://127.0.0.1:9464/$1"; }
  # prom_sum SCRAPE FAMILY [LABELS]: the family's samples (those whose labels
  # hold LABELS, e.g. verdict="refused") added up over workers and rules.
  prom_sum() { awk -v m="$2" -v l="${3:-}" '$1 ~ "^"m"[{]" && index($1, l) { n += $2 } END { print n + 0 }' <<<"$1"; }
  before="$("$ctl" --socket "$SLT_TMP/control.sock" --json stats)"
  scrape_before="$(scrape metrics)"
  client st --source "$s" --count 21 --path '/st/{i}'
  after="$("$ctl" --socket "$SLT_TMP/control.sock" --json stats)"
  scrape_after="$(scrape metrics)"
  check_eq "Prometheus: admitted moved by 20" \
    "$(($(prom_sum "$scrape_after" sluice_requests_total 'verdict="admitted"') - $(prom_sum "$scrape_before" sluice_requests_total 'verdict="admitted"')))" 20
  check_eq "Prometheus: refused moved by 1" \
    "$(($(prom_sum "$scrape_after" sluice_requests_total 'verdict="refused"') - $(prom_sum "$scrape_before" sluice_requests_total 'verdict="refused"')))" 1
  check_eq "Prometheus: request heads moved by 21" \
    "$(($(prom_sum "$scrape_after" sluice_request_heads_total) - $(prom_sum "$scrape_before" sluice_request_heads_total)))" 21
  check_eq "Prometheus: typed" "$(grep -c '^# TYPE sluice_requests_total counter$' <<<"$scrape_after")" 1
  check_eq "Prometheus: the bare rule's refusals moved by 1" \
    "$(($(prom_sum "$scrape_after" sluice_requests_total 'verdict="refused",rule="bare"') - $(prom_sum "$scrape_before" sluice_requests_total 'verdict="refused",rule="bare"')))" 1
  check_eq "Prometheus: sluice_build_info" "$(grep -cE '^sluice_build_info[{]version="[^"]+",dpdk_version="[^"]+"[}] 1$' <<<"$scrape_after")" 1
  # Entries as the reclaimer last counted them: every region every second.
  local entries_seen=0 tries
  for ((tries = 0; tries < 24; tries++)); do
    grep -qE '^sluice_table_entries[{]table="buckets"[}] [1-9]' <<<"$(scrape metrics)" && { entries_seen=1; break; }
    sleep 0.5
  done
  check_eq "Prometheus: the bucket table's entries (within the reclaimer's 10 s)" "$entries_seen" 1
  check_eq "Prometheus: other paths 404" "$(ip netns exec "$NS_BOX" curl -s -o /dev/null -w '%{http_code}' --max-time 5 http://127.0.0.1:9464/)" 404
  delta() {
    "$SLT_PY" -c 'import json,sys; a=json.loads(sys.argv[1]); b=json.loads(sys.argv[2]); print(int(b["counters"][sys.argv[3]] - a["counters"][sys.argv[3]]))' \
      "$before" "$after" "$1"
  }
  check_eq "statuses" "$(res statuses st)" "200x20 429."
  check_eq "stats: requests parsed" "$(delta requests)" 21
  check_eq "stats: admitted" "$(delta admitted)" 20
  check_eq "stats: refused (TB01 bare budget)" "$(delta refused)" 1
  check_eq "stats: answers sent" "$(delta answers_sent)" 1
  # DPDK telemetry: the same counters on /sluice/stats (dpdk-telemetry.py's protocol).
  local tsock tel
  tsock="$("$SLT_PY" -c 'import json,sys; print(json.loads(sys.argv[1])["telemetry_socket"])' "$("$ctl" --socket "$SLT_TMP/control.sock" --json status)")"
  tel="$(ip netns exec "$NS_BOX" "$SLT_PY" "$SLT_HERE/telemetry.py" "$tsock" /sluice/stats 2>&1)"
  check_eq "telemetry /sluice/stats: requests as stats says" \
    "$("$SLT_PY" -c 'import json,sys; print(json.loads(sys.argv[1])["/sluice/stats"]["requests"])' "$tel" 2>&1)" \
    "$("$SLT_PY" -c 'import json,sys; print(int(json.loads(sys.argv[1])["counters"]["requests"]))' "$after")"
  tel="$(ip netns exec "$NS_BOX" "$SLT_PY" "$SLT_HERE/telemetry.py" "$tsock" /sluice/status 2>&1)"
  check_eq "telemetry /sluice/status: the policy" \
    "$("$SLT_PY" -c 'import json,sys; print(json.loads(sys.argv[1])["/sluice/status"]["policy"])' "$tel" 2>&1)" three-budgets-small
  check_eq "stats: the bare rule's counts" \
    "$("$SLT_PY" -c 'import json,sys; a=json.loads(sys.argv[1]); b=json.loads(sys.argv[2]); r=lambda d: [x for x in d["rules"] if x["name"] == "bare"][0]; print(int(r(b)["admitted"] - r(a)["admitted"]), int(r(b)["refused"] - r(a)["refused"]))' "$before" "$after")" "20 1"
  # The busiest keys (the top 10 of a space-saving table the earlier tests
  # of this appliance filled too): 60 more refusals make this client one of
  # them whatever those tests left (its 21 requests alone weigh 17 or 33,
  # depending on which admissions were sampled).
  client burst --source "$s" --connections 60 --count 1 --path '/st/burst{c}'
  check_eq "a burst of refusals" "$(res count burst 429)" 60
  after="$("$ctl" --socket "$SLT_TMP/control.sock" --json stats)"
  check_eq "stats: the busiest keys name this client under the bare rule" \
    "$("$SLT_PY" -c 'import json,sys; d=json.loads(sys.argv[1]); print(any(k["rule"] == "bare" and k["key"] == sys.argv[2] for k in d["busiest"]))' "$after" "$s")" True
  # sluicectl top: two frames of rates, per rule, bounded by --count.
  out="$(timeout 20 "$ctl" --socket "$SLT_TMP/control.sock" top --count 2 --interval 0.3 2>&1)"
  check_eq "top: exit" "$?" 0
  check_eq "top: two frames" "$(grep -c '^sluicectl top' <<<"$out")" 2
  check_eq "top: the bare rule's row" "$(grep -cE '^bare +[0-9]+ +[0-9]+ +[0-9]+$' <<<"$out")" 2
  check_eq "top: the busiest keys" "$(grep -c "^bare  *$s " <<<"$out")" 2
  out="$(setpriv --reuid=65534 --regid=65534 --clear-groups "$ctl" --socket "$SLT_TMP/control.sock" status 2>&1)"
  rc=$?
  check_eq "an unprivileged user: exit" "$rc" 3
  check_eq "an unprivileged user: told why" "$(grep -c 'permission denied' <<<"$out")" 1
  out="$("$ctl" --socket "$SLT_TMP/control.sock" policy show 2>&1)"
  check_eq "policy show: the bare rule" "$(grep -c '^rules .*bare' <<<"$out")" 1
  out="$("$ctl" --socket "$SLT_TMP/control.sock" policy check "$SLT_REPO/config/route-families.yaml" 2>&1)"
  check_eq "policy check of a good file: exit" "$?" 0
  check_eq "policy check of a good file: named" "$(grep -c "ok: policy 'route-families'" <<<"$out")" 1
  printf 'sluice: 1\nname: broken\nbuckets:\n  b: { rate: 5/fortnight }\nrules: []\n' >"$SLT_TMP/broken.yaml"
  out="$("$ctl" --socket "$SLT_TMP/control.sock" policy check "$SLT_TMP/broken.yaml" 2>&1)"
  rc=$?
  check_eq "policy check of a broken file: refused (exit 1)" "$rc" 1
  check_eq "policy check of a broken file: file:line:column" "$(grep -cE 'broken.yaml:4:[0-9]+: ' <<<"$out")" 1
  "$ctl" --socket "$SLT_TMP/control.sock" frobnicate >/dev/null 2>&1
  check_eq "unknown command: exit" "$?" 2
  # A second sluiced on the same state directory is refused before it
  # touches a port (exit 8), naming the one that holds it.
  out="$(ip netns exec "$NS_BOX" timeout 20 "$SLUICED" --config "$SLT_TMP/policies/tb-small.yaml" --af-packet c1:o1 \
    --state-dir "$SLT_TMP/state" --control-socket "$SLT_TMP/second.sock" 2>&1)"
  rc=$?
  check_eq "a second sluiced on the state directory: exit 8" "$rc" 8
  check_eq "... told who holds it" "$(grep -c 'in use by another sluiced (pid [0-9]*)' <<<"$out")" 1
  "$ctl" --socket "$SLT_TMP/nothing-here.sock" status >/dev/null 2>&1
  check_eq "no daemon: exit" "$?" 3
  finish
}

# A real Prometheus server scrapes sluiced. Debian's
# /usr/bin/prometheus, started by this test in the appliance's namespace
# (loopback 127.0.0.1:9490, its own configuration and TSDB in a temporary
# directory, scrape_interval 1s), stopped by its PID and its directory
# removed however the test ends. An address spends its bare budget (20 an
# hour, TB01) and is then refused over fresh connections; once Prometheus
# has scraped again, sum(sluice_requests_total{verdict="refused"}) has grown
# by exactly the 429s the client got (the bare rule's series too, and the
# admitted ones by the 200s). promtool check metrics passes on a live
# scrape; the Grafana dashboard (contrib/grafana/sluice.json) is JSON.
t_ctl_prometheus_scrape() {
  local s dir pid i code out before admitted_before want refused
  s="$(src4)"
  [ -x /usr/bin/prometheus ] && [ -x /usr/bin/promtool ] ||
    { fail "no /usr/bin/prometheus or /usr/bin/promtool (scripts/install-deps.sh test installs Debian's prometheus)"; finish; }
  out="$SLT_OUT/metrics.txt"
  ip netns exec "$NS_BOX" curl -sS --max-time 5 http://127.0.0.1:9464/metrics >"$out"
  check_eq "promtool check metrics on a live scrape" "$(/usr/bin/promtool check metrics <"$out" 2>&1; echo "exit $?")" "exit 0"
  check_eq "the dashboard is JSON" "$("$SLT_PY" -m json.tool "$SLT_REPO/contrib/grafana/sluice.json" >/dev/null 2>&1; echo $?)" 0

  dir="$(mktemp -d "$SLT_TMP/prometheus.XXXXXX")"
  printf 'global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: sluiced\n    static_configs:\n      - targets: ["127.0.0.1:9464"]\n' >"$dir/prometheus.yml"
  ip netns exec "$NS_BOX" /usr/bin/prometheus --config.file="$dir/prometheus.yml" --storage.tsdb.path="$dir/data" \
    --web.listen-address=127.0.0.1:9490 --log.level=warn >"$SLT_OUT/prometheus.log" 2>&1 </dev/null &
  pid=$!  # ip netns exec execs prometheus: this is its PID
  # shellcheck disable=SC2064  # expanded now: the PID and directory of this run
  trap "kill -TERM $pid 2>/dev/null; for ((i = 0; i < 50; i++)); do kill -0 $pid 2>/dev/null || break; sleep 0.2; done; kill -KILL $pid 2>/dev/null; rm -rf '$dir'" EXIT
  trap 'exit 1' TERM INT
  # promq QUERY: the first sample's value of an instant query, or "none".
  promq() {
    ip netns exec "$NS_BOX" curl -sS --max-time 3 --get --data-urlencode "query=$1" http://127.0.0.1:9490/api/v1/query 2>/dev/null |
      "$SLT_PY" -c 'import json,sys
try: r = json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else "none")
except Exception: print("none")'
  }
  # wait_for QUERY WANT: up to 20 s for the query to answer WANT; prints what it last answered.
  wait_for() {
    local got="none" n
    for ((n = 0; n < 40; n++)); do
      got="$(promq "$1")"
      [ "$got" = "$2" ] && break
      sleep 0.5
    done
    printf '%s' "$got"
  }
  for ((i = 0; i < 60; i++)); do
    code="$(ip netns exec "$NS_BOX" curl -s -o /dev/null -w '%{http_code}' --max-time 2 http://127.0.0.1:9490/-/ready)"
    [ "$code" = 200 ] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.5
  done
  [ "$code" = 200 ] || { fail "prometheus not ready within 30 s: $(tail -c 300 "$SLT_OUT/prometheus.log")"; finish; }
  check_eq "Prometheus scrapes sluiced (up)" "$(wait_for 'up{job="sluiced"}' 1)" 1

  # Nothing else runs now: what the scrape says Prometheus must come to say.
  local scraped bare_before
  scraped="$(ip netns exec "$NS_BOX" curl -sS --max-time 5 http://127.0.0.1:9464/metrics)"
  # requests_sum LABELS: sluice_requests_total's samples with LABELS in this scrape, added up.
  requests_sum() { awk -v l="$1" '$1 ~ /^sluice_requests_total[{]/ && index($1, l) { n += $2 } END { print n + 0 }' <<<"$scraped"; }
  before="$(requests_sum 'verdict="refused"')"
  bare_before="$(requests_sum 'verdict="refused",rule="bare"')"
  admitted_before="$(requests_sum 'verdict="admitted"')"
  check_eq "Prometheus has the refusals so far" "$(wait_for 'sum(sluice_requests_total{verdict="refused"})' "$before")" "$before"

  client spend --source "$s" --count 20 --path '/prom/{i}'
  client refused --source "$s" --connections 7 --count 1 --path '/prom/r{c}'
  check_eq "the budget spent" "$(res statuses spend)" "200x20"
  refused="$(res count refused 429)"
  check_eq "refused over fresh connections" "$refused" 7
  want=$((before + refused))
  note "refused before: $before (bare $bare_before), admitted before: $admitted_before; the client saw $refused 429s"
  check_eq "PromQL: sum(sluice_requests_total{verdict=\"refused\"}) grew by the client's 429s" \
    "$(wait_for 'sum(sluice_requests_total{verdict="refused"})' "$want")" "$want"
  check_eq "PromQL: the bare rule's refusals too" \
    "$(wait_for 'sum(sluice_requests_total{verdict="refused",rule="bare"})' "$((bare_before + refused))")" "$((bare_before + refused))"
  check_eq "PromQL: admitted grew by the 200s" \
    "$(wait_for 'sum(sluice_requests_total{verdict="admitted"})' "$((admitted_before + 20))")" "$((admitted_before + 20))"
  check_eq "PromQL: sluice_build_info" "$(promq 'count(sluice_build_info)')" 1
  check_olog "origin log: the 20 admitted only" "$s" 20
  finish
}

# Policy reload (sluicectl policy reload, SIGHUP): published while requests
# flow (none is lost: 60000 exempt /healthz requests on one keep-alive
# connection across two reloads all get their 200), buckets that did not
# change keep their state (TB01: 15 of the 20 spent before, 5 after), a
# broken file changes nothing and is refused with its line and column.
# Without a file (and on SIGHUP) sluiced reloads its own --config file; a
# request that names a file without passing it is refused, unread.
t_ctl_reload() {
  local s0 s1 ctl sock copy gen out rc pid i
  s0="$(src4 0)" s1="$(src4 1)"
  ctl="$(dirname "$SLUICED")/sluicectl"
  sock="$SLT_TMP/control.sock"
  copy="$SLT_TMP/tb-small-renamed.yaml"
  sed 's/^name: three-budgets-small$/name: three-budgets-small-renamed/' "$SLT_TMP/policies/tb-small.yaml" >"$copy"
  client spend --source "$s0" --count 15 --path '/rl/a{i}'
  check_eq "15 admitted before the reload" "$(res statuses spend)" "200x15"
  # The load: exempt requests, so every one must be answered 200.
  ip netns exec "$NS_CLI" timeout -k 2 60 "$SLT_PY" "$SLT_HERE/http_client.py" --host "$ORIGIN4" --source "$s1" \
    --count 60000 --timeout 50 --path /healthz --out "$SLT_OUT/load.jsonl" >"$SLT_OUT/load.stdout" 2>&1 &
  local load=$!
  sleep 1  # reload once the load flows (starting a client takes ~0.5 s); still running is checked below
  out="$("$ctl" --socket "$sock" policy reload "$copy" 2>&1)"
  check_eq "reload: exit" "$?" 0
  check_eq "reload: said so" "$(grep -c "reloaded: policy 'three-budgets-small-renamed'" <<<"$out")" 1
  out="$("$ctl" --socket "$sock" policy reload 2>&1)"  # sluiced's --config file
  check_eq "second reload: exit" "$?" 0
  check_eq "second reload: the --config file" "$(grep -c "reloaded: policy 'three-budgets-small' from .*/tb-small.yaml" <<<"$out")" 1
  kill -0 "$load" 2>/dev/null
  check_eq "the load was still flowing after both reloads" "$?" 0
  wait "$load"
  check_eq "the load across both reloads: all answered" "$(res statuses load)" "200x60000"
  client after --source "$s0" --count 6 --path '/rl/b{i}'
  check_eq "TB01 the bucket kept its state: 5 more, then 429" "$(res statuses after)" "200x5 429."
  gen="$("$ctl" --socket "$sock" --json policy show | "$SLT_PY" -c 'import json,sys; print(int(json.load(sys.stdin)["generation"]))')"
  printf 'sluice: 1\nname: broken\nbuckets:\n  b: { rate: 5/fortnight }\nrules: []\n' >"$SLT_TMP/broken.yaml"
  out="$("$ctl" --socket "$sock" policy reload "$SLT_TMP/broken.yaml" 2>&1)"
  rc=$?
  check_eq "broken reload: refused (exit 1)" "$rc" 1
  check_eq "broken reload: file:line:column" "$(grep -cE 'broken.yaml:4:[0-9]+: ' <<<"$out")" 1
  check_eq "broken reload: nothing changed" \
    "$("$ctl" --socket "$sock" --json policy show | "$SLT_PY" -c 'import json,sys; d=json.load(sys.stdin); print(d["name"], int(d["generation"]))')" \
    "three-budgets-small $gen"
  out="$("$SLT_PY" - "$sock" <<'EOF'
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(b'{"v":1,"cmd":"policy.reload","file":"/etc/shadow"}\n')
print(s.makefile().readline().strip())
EOF
)"
  check_eq "a named file, not passed: refused, unread" \
    "$(grep -c '"bad_request".*sluiced opens no file a client names' <<<"$out")$(grep -c 'root:' <<<"$out")" 10
  # A policy past 1 MiB is refused unparsed (the control thread parses it
  # while every other client waits); a file name with a line break in it
  # does not write lines of its own into sluiced's log.
  { printf 'sluice: 1\n'; head -c $((2 * 1024 * 1024)) /dev/zero | tr '\0' '#'; } >"$SLT_TMP/huge.yaml"
  out="$("$ctl" --socket "$sock" policy check "$SLT_TMP/huge.yaml" 2>&1)"
  rc=$?
  check_eq "a 2 MiB policy: refused unparsed" "$rc $(grep -c 'larger than 1 MiB; not read' <<<"$out")" "1 1"
  local odd="$SLT_TMP/odd
sluiced: forged.yaml"
  cp "$copy" "$odd"
  "$ctl" --socket "$sock" policy reload "$odd" >/dev/null 2>&1
  check_eq "a file name's line break stays out of the log" "$(grep -c '^sluiced: forged.yaml' "$SLT_SLUICED_LOG")" 0
  rm -f "$odd"
  gen="$("$ctl" --socket "$sock" --json policy show | "$SLT_PY" -c 'import json,sys; print(int(json.load(sys.stdin)["generation"]))')"
  # SIGHUP reloads the --config file.
  pid="$(ip netns pids "$NS_BOX" | head -n 1)"
  kill -HUP "$pid"
  for ((i = 0; i < 30; i++)); do
    [ "$("$ctl" --socket "$sock" --json policy show | "$SLT_PY" -c 'import json,sys; print(int(json.load(sys.stdin)["generation"]))')" = $((gen + 1)) ] && break
    sleep 0.1
  done
  check_eq "SIGHUP: published" "$("$ctl" --socket "$sock" --json policy show | "$SLT_PY" -c 'import json,sys; print(int(json.load(sys.stdin)["generation"]))')" $((gen + 1))
  # Retired policies are freed once no request in flight uses them: with the
  # load over, only the current one is held within a few seconds.
  local held
  for ((i = 0; i < 50; i++)); do
    held="$("$ctl" --socket "$sock" --json status | "$SLT_PY" -c 'import json,sys; print(int(json.load(sys.stdin)["policy"]["snapshots_held"]))')"
    [ "$held" = 1 ] && break
    sleep 0.1
  done
  check_eq "retired policies freed (snapshots held)" "$held" 1
  check_olog "origin log: 20 admitted" "$s0" 20
  finish
}

t_tb_healthz_exempt() {
  local s code
  s="$(src4)"
  client hz --source "$s" --plan '[
    {"count": 20, "path": "/hz/{i}"},
    {"count": 1, "path": "/healthz"},
    {"count": 1, "path": "/healthz", "method": "HEAD"},
    {"count": 1, "path": "/healthz", "method": "POST", "body": "x"},
    {"count": 1, "path": "/healthz/deep"}]'
  # 20 admitted | GET /healthz | HEAD /healthz | POST /healthz | GET /healthz/deep
  check_eq "TB18 /healthz exempt for GET and HEAD only" "$(res statuses hz)" "200x20 | 200 | 200 | 429. | 429."
  check_eq "TB18 no RateLimit-Limit on GET /healthz" "$(res has-header hz 21 RateLimit-Limit)" no
  check_eq "TB18 no RateLimit-Limit on HEAD /healthz" "$(res has-header hz 22 RateLimit-Limit)" no
  code="$(ccurl c --interface "$s" "http://$ORIGIN4/hz/curl")"
  check_eq "curl: status" "$code" 429
  check_eq "curl: TB14 body" "$(cbody c)" "$SLT_TB14_BODY"
  check_range "curl: TB15 Retry-After" "$(chdr c Retry-After)" 170 180
  check_eq "curl: Connection" "$(chdr c Connection)" close
  check_eq "curl: RateLimit-Policy" "$(chdr c RateLimit-Policy)" "20;w=3600"
  check_olog "origin log: 20 admitted + GET and HEAD /healthz" "$s" 22
  finish
}

# TB08: with an origin granted, a preflight (OPTIONS + Origin) on a
# browser-reachable path is exempt: forwarded (the origin answers it),
# uncounted, no RateLimit-* fields. From one address (bare budget 20 per
# hour): 25 preflights all pass; then an OPTIONS without Origin (on /v1/)
# and a preflight outside preflight_paths, both ordinary bare requests
# (counted); then bare GETs: exactly 18 are admitted before the 429 (20 less
# those two; had the preflights counted, the 21st preflight would have been
# refused). Out of budget, a preflight still passes, while an OPTIONS without
# Origin and one outside preflight_paths are refused. TB09: a 429 to a
# request from a granted origin carries Access-Control-Allow-Origin and
# exposes Retry-After and RateLimit-*.
t_tb_cors_preflight() {
  local s0 s1 o="Origin: $SLT_PAGE_ORIGIN" expose
  s0="$(src4 0)" s1="$(src4 1)"
  client pf --source "$s0" --plan '[
    {"count": 25, "method": "OPTIONS", "path": "/v1/pf/{i}", "headers": ["'"$o"'", "Access-Control-Request-Method: GET", "Access-Control-Request-Headers: authorization"]},
    {"count": 1, "method": "OPTIONS", "path": "/v1/x"},
    {"count": 1, "method": "OPTIONS", "path": "/elsewhere", "headers": ["'"$o"'", "Access-Control-Request-Method: GET"]},
    {"count": 19, "path": "/v1/after/{i}"},
    {"count": 1, "method": "OPTIONS", "path": "/v1/pf/late", "headers": ["'"$o"'", "Access-Control-Request-Method: GET"]},
    {"count": 1, "method": "OPTIONS", "path": "/v1/x2"},
    {"count": 1, "method": "OPTIONS", "path": "/elsewhere2", "headers": ["'"$o"'", "Access-Control-Request-Method: GET"]}]'
  # 25 preflights | no Origin | outside preflight_paths | 18 bare + 429 | preflight | no Origin | outside
  check_eq "TB08 preflights exempt and uncounted, the rest ordinary bare requests" "$(res statuses pf)" \
    "204x25 | 204 | 200 | 200x18 429. | 204 | 429. | 429."
  check_eq "TB08 no RateLimit-* on preflights" \
    "$(res expr pf 'sum(1 for r in R for h in r["headers"] if h.startswith("ratelimit") and r["status"] == 204 and r["conn"] in (0, 4))')" 0
  check_eq "TB14 body" "$(res body pf 46)" "$SLT_TB14_BODY"
  check_eq "TB16 429 RateLimit-Remaining" "$(res header pf 46 RateLimit-Remaining)" 0
  check_olog "25 + 1 preflights, the 2 counted OPTIONS and the 18 admitted" "$s0" 46
  # TB09: credential budget 4, from the granted origin.
  client cred --source "$s1" --count 5 --path '/v1/c/{i}' -H "$o" -H 'Authorization: Bearer slt-cors-curl'
  check_eq "TB09 4 admitted, then 429" "$(res statuses cred)" "200x4 429."
  check_eq "TB09 Access-Control-Allow-Origin" "$(res header cred 5 Access-Control-Allow-Origin)" "$SLT_PAGE_ORIGIN"
  expose="$(res header cred 5 Access-Control-Expose-Headers | tr 'A-Z' 'a-z')"
  for h in retry-after ratelimit-limit ratelimit-remaining ratelimit-reset ratelimit-policy; do
    [[ ",$(tr -d ' ' <<<"$expose")," == *",$h,"* ]] || fail "TB09 Access-Control-Expose-Headers lacks $h: '$expose'"
  done
  check_re "TB15 Retry-After" "$(res header cred 5 Retry-After)" '^[1-9][0-9]*$'
  check_eq "TB16 429 RateLimit-Remaining" "$(res header cred 5 RateLimit-Remaining)" 0
  check_olog "the 4 credentialed admitted only" "$s1" 4
  finish
}

# Headless Chromium in the client namespace loads a page from
# http://198.18.0.20:8080 (bridged, not a service port); its script calls
# fetch() with Authorization against http://198.18.0.20/v1/... (port 80,
# through the limiter), so every call is preceded by a CORS preflight that
# the limiter sees. The script writes what it read into the DOM, which
# --dump-dom prints once the fetches are done (--virtual-time-budget).
# slt_chromium TAG N CREDENTIAL: runs it; the result JSON to $SLT_OUT/TAG.json.
slt_chromium() {
  local tag="$1" n="$2" cred="$3" d="$SLT_TMP/chromium-$1" rc
  if ! command -v chromium >/dev/null; then
    fail "chromium is not installed (scripts/install-deps.sh test installs it)"
    return 1
  fi
  mkdir -p "$d/home"
  cat >"$SLT_TMP/nginx/www/page.html" <<'EOF'
<!doctype html>
<html><head><meta charset="utf-8"><title>sluice CORS test</title></head>
<body><pre id="result">pending</pre>
<script>
(async () => {
  const q = new URLSearchParams(location.search);
  const n = Number(q.get("n") || 1), cred = q.get("cred") || "slt", tag = q.get("tag") || "x";
  const out = [];
  for (let i = 1; i <= n; i++) {
    try {
      const r = await fetch("http://198.18.0.20/v1/items/" + tag + "-" + i, {
        headers: {"Authorization": "Bearer " + cred}, cache: "no-store"});
      const body = await r.text();
      out.push({i: i, status: r.status, retryAfter: r.headers.get("Retry-After"),
                limit: r.headers.get("RateLimit-Limit"), remaining: r.headers.get("RateLimit-Remaining"),
                body: body.slice(0, 200)});
    } catch (e) {
      out.push({i: i, error: String(e)});
    }
  }
  document.getElementById("result").textContent = "SLT-RESULT " + JSON.stringify(out);
})();
</script></body></html>
EOF
  HOME="$d/home" ip netns exec "$NS_CLI" timeout -k 5 90 chromium --headless --no-sandbox --disable-gpu \
    --user-data-dir="$d/profile" --no-first-run --no-default-browser-check --disable-background-networking \
    --disable-component-update --disable-sync --disable-extensions --disable-default-apps \
    --virtual-time-budget=30000 --dump-dom "$SLT_PAGE_ORIGIN/page.html?n=$n&cred=$cred&tag=$tag" \
    >"$SLT_OUT/$tag.dom" 2>"$SLT_OUT/$tag.chromium.log"
  rc=$?
  "$SLT_PY" - "$SLT_OUT/$tag.dom" "$SLT_OUT/$tag.json" <<'EOF'
import html, re, sys
m = re.search(r"SLT-RESULT (.*?)</pre>", open(sys.argv[1], errors="replace").read(), re.S)
open(sys.argv[2], "w").write(html.unescape(m.group(1)) if m else "")
EOF
  if [ ! -s "$SLT_OUT/$tag.json" ]; then
    fail "chromium (status $rc) produced no result in the DOM; its log: $(grep -v -e dbus -e 'Fontconfig' "$SLT_OUT/$tag.chromium.log" | tail -5 | tr '\n' ' ')"
    return 1
  fi
  note "chromium $tag: $(cat "$SLT_OUT/$tag.json")"
  return 0
}
cres() {  # cres TAG PYEXPR: evaluate with F = the fetch results
  "$SLT_PY" -c "import json,sys; F=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$SLT_OUT/$1.json" "$2"
}

# Chromium plumbing: the page loads from port 8080, the preflight and the
# credentialed fetch to port 80 both reach the origin, the script can read
# the response. (The browser's address is CLIENT4, which the readiness
# probes share: the origin log is read from a mark set at the start.)
t_plumbing_chromium() {
  olog_mark
  slt_chromium plumb 1 slt-plumbing || finish
  check_eq "fetch result" "$(cres plumb 'F[0].get("status", F[0].get("error"))')" 200
  check_eq "fetch body" "$(cres plumb 'F[0].get("body")')" "ok"
  check_eq "preflight reached the origin" \
    "$(olog_count "$CLIENT4" '$2 == "OPTIONS" && $3 == "/v1/items/plumb-1" && $4 == 204')" 1
  check_eq "GET reached the origin" "$(olog_count "$CLIENT4" '$2 == "GET" && $3 == "/v1/items/plumb-1"')" 1
  check_olog "nothing else" "$CLIENT4" 2
  finish
}

# TB08/TB09 from a real browser: 5 credentialed fetch() calls (credential
# budget 4), each after its own preflight. The preflights pass uncounted
# (all 5 reach the origin); fetches 1-4 are admitted; the script can read the
# 429 of the 5th (so it carried Access-Control-Allow-Origin) and its
# Retry-After and RateLimit-Remaining (exposed, TB09); the 5th GET never
# reaches the origin, not even in part. Then the address's bare budget is
# whole: 20 bare requests admitted before the 429 (the browser's preflights
# took none of it).
t_chromium_cors() {
  olog_mark
  slt_chromium cors 5 slt-chromium || finish
  check_eq "statuses seen by the script" \
    "$(cres cors '" ".join(str(f.get("status", "error")) for f in F)')" "200 200 200 200 429"
  check_re "TB09 Retry-After readable on the 429" "$(cres cors 'F[4].get("retryAfter")')" '^[1-9][0-9]*$'
  check_eq "TB09 RateLimit-Remaining readable on the 429" "$(cres cors 'F[4].get("remaining")')" 0
  check_eq "TB09 the 429 body readable" "$(cres cors 'F[4].get("body")')" "$SLT_TB14_BODY"
  check_eq "TB08 all 5 preflights reached the origin" \
    "$(olog_count "$CLIENT4" '$2 == "OPTIONS" && $3 ~ /^\/v1\/items\/cors-/')" 5
  check_eq "4 GETs reached the origin" "$(olog_count "$CLIENT4" '$2 == "GET" && $3 ~ /^\/v1\/items\/cors-/')" 4
  check_olog "5 preflights and 4 GETs, nothing of the refused 5th" "$CLIENT4" 9
  client after --source "$CLIENT4" --count 21 --path '/v1/bare-after/{i}'
  check_eq "TB08 the browser's preflights left the bare budget whole" "$(res statuses after)" "200x20 429."
  check_olog "and the 20 bare ones" "$CLIENT4" 29
  finish
}

# Design decisions 2 and 3 (a request is charged once; only tracked flows
# count) and TB01/TB14: a SYN that reaches the appliance on a connection it
# already tracks must not take the connection out of the limiter.
# replay.py opens a kept-alive connection, then (syn-dup) sends the very
# frame of its opening SYN again once the handshake is done (a retransmitted
# or duplicated SYN that crossed the SYN-ACK, as on any lossy path: the
# connection must go on, limited), or (syn-midstream) a SYN with another
# sequence number after the first request (what a client can send on
# purpose: the connection may go on, limited, or the appliance may end it),
# then sends 25 requests: the bare budget of 20 admits exactly 20, then the
# 429; the origin sees only the admitted ones.
t_tb_syn_replay() {
  local s0 s1 mid n200
  s0="$(src4 0)" s1="$(src4 1)"
  replay syn-dup "$s0" 25
  replay syn-midstream "$s1" 25
  check_eq "duplicate SYN after the handshake" "$(cat "$SLT_OUT/syn-dup.out")" "200x20 429."
  check_olog "duplicate SYN: the 20 admitted only" "$s0" 20
  mid="$(cat "$SLT_OUT/syn-midstream.out")"
  if [[ "$mid" =~ ^200(x([0-9]+))?\ !gone$ ]]; then
    n200="${BASH_REMATCH[2]:-1}"
    note "the appliance ended the connection after the mid-connection SYN ($n200 admitted)"
    check_range "SYN mid-connection, connection ended: admitted before" "$n200" 1 20
    check_olog "SYN mid-connection: the admitted only" "$s1" "$n200"
  else
    check_eq "SYN mid-connection" "$mid" "200x20 429."
    check_olog "SYN mid-connection: the 20 admitted only" "$s1" 20
  fi
  finish
}

# Design decision 2 (the 429 goes to the client "as if from the origin") and
# TB14: an old segment of the origin's that reaches the appliance late (here
# its SYN-ACK again, sent from the origin's side just before the refused
# request; on a real path a duplicate or a reordered retransmission) must not
# make the answer unacceptable to the client. Its TCP timestamp is older than
# the ones the client has since seen from the origin; a 429 that carried it
# as its own TSval would be dropped by the client's PAWS check (RFC 7323
# 5.3), and the client would retransmit its request until the appliance
# forgot the flow and reset it. Expected: 20 admitted, then the 429 and the
# close.
t_tb_stale_origin_segment() {
  local s
  s="$(src4)"
  replay stale-synack "$s" 21 --origin-netns "$NS_ORG" --at 21
  check_eq "TB14 the 429 reaches the client after a stale origin segment" "$(cat "$SLT_OUT/stale-synack.out")" "200x20 429."
  check_olog "the 20 admitted only" "$s" 20
  finish
}

replay() {  # replay MODE SOURCE COUNT [ARGS...]: replay.py; its statuses to $SLT_OUT/MODE.out
  local mode="$1" src="$2" count="$3" rc
  shift 3
  ip netns exec "$NS_CLI" timeout -k 2 40 "$SLT_PY" "$SLT_HERE/replay.py" --mode "$mode" --source "$src" \
    --host "$ORIGIN4" --count "$count" "$@" >"$SLT_OUT/$mode.out" 2>"$SLT_OUT/$mode.err"
  rc=$?
  note "replay $mode: status $rc, $(cat "$SLT_OUT/$mode.out"); $(tr '\n' ' ' <"$SLT_OUT/$mode.err" | tail -c 300)"
  [ "$rc" -eq 0 ] || fail "replay.py --mode $mode failed (status $rc): $(tail -c 300 "$SLT_OUT/$mode.err")"
}

# ================================================================ wire-*
# Nothing walks past the limiter: each case below would reach the origin
# beyond its budget through an appliance without these checks. mangle.py rewrites the real client's frames on their way
# into the appliance, as an attacker's own stack would send them; nginx's
# access log is the witness. tb-small: the bare budget is 20 an hour, a 429
# closes the connection.

# Case 1, overlapping segments: before each request segment, a decoy at the
# same sequence number whose 20 bytes are "GET /healthz HTTP/1." (TB18: an
# exempt health check) where the real segment has "GET /ov/abcd HTTP/1.". The
# appliance judges the first copy of each byte; the origin must get exactly
# those, so it serves /healthz 25 times and /ov/abcd never (before: /ov/abcd
# 25 times, past the budget of 20).
t_wire_overlap_decoy() {
  local s
  s="$(src4)"
  trap 'mangle_off' EXIT
  mangle_on overlap-decoy --match 'GET /ov/' --decoy 'GET /healthz HTTP/1.' || fail "mangle.py did not start"
  client ov --source "$s" --count 25 --path '/ov/abcd'
  mangle_off
  check_eq "decoys sent" "$(mangle_count decoys)" 25
  check_eq "every request answered as the health check that was judged" "$(res statuses ov)" "200x25"
  check_eq "the judged body" "$(res body ov 25)" healthy
  check_eq "origin: the judged path, 25 times" "$(olog_count "$s" '$3 == "/healthz"')" 25
  check_eq "origin: the path nobody judged, never" "$(olog_count "$s" '$3 ~ /^\/ov\//')" 0
  finish
}

# Case 2, IPv6 extension chains: every client segment (the SYN too) carries
# nine Destination Options headers. The appliance once walked eight and
# bridged the segment unjudged (100 of 100 served against 60); now TB01's
# budget holds: 20 admitted, then the 429 and the close.
t_wire_ipv6_extension_chain() {
  local s
  s="$(src6)"
  trap 'mangle_off' EXIT
  mangle_on ipv6-dstopts --count 9 || fail "mangle.py did not start"
  client x6 --host "$ORIGIN6" --source "$s" --count 25 --path '/x6/{i}'
  mangle_off
  check_range "client segments given the nine headers" "$(mangle_count rewritten)" 21 1000
  check_eq "TB01 with nine extension headers: 20 admitted, then the 429" "$(res statuses x6)" "200x20 429."
  check_olog "the 20 admitted only" "$s" 20
  finish
}

# IPv4 options on every client segment (NOP NOP NOP EOL): walked over, the
# segment judged like any other.
t_wire_ipv4_options() {
  local s
  s="$(src4)"
  trap 'mangle_off' EXIT
  mangle_on ipv4-options || fail "mangle.py did not start"
  client o4 --source "$s" --count 25 --path '/o4/{i}'
  mangle_off
  check_range "client segments given the options" "$(mangle_count rewritten)" 21 1000
  check_eq "TB01 with IPv4 options: 20 admitted, then the 429" "$(res statuses o4)" "200x20 429."
  check_olog "the 20 admitted only" "$s" 20
  finish
}

# IPv4 fragments on a service port: every client segment with payload goes
# as two fragments (the ports, then the rest), which the origin's stack
# would reassemble. On a NIC the appliance drops a service-port segment's
# first fragment (it never sees the segment whole) and no request is served;
# DPDK's AF_PACKET driver, which this suite runs on, has the kernel
# reassemble fragments before the appliance reads them (its socket fanout
# asks for defragmentation), so here each request arrives whole and is
# judged like any other. Either way no fragmented request gets past the
# budget: 20 admitted at most, then the 429.
t_wire_ipv4_fragments() {
  local s st
  s="$(src4)"
  trap 'mangle_off' EXIT
  mangle_on ipv4-fragments || fail "mangle.py did not start"
  client fg --source "$s" --count 25 --path '/fg/{i}' --timeout 5
  mangle_off
  check_range "client segments sent as fragments" "$(mangle_count rewritten)" 21 1000
  st="$(res statuses fg)"
  note "statuses: $st"
  [[ "$st" == "200x20 429." || "$(res count fg 200)" == 0 ]] ||
    fail "fragmented requests: got '$st', want '200x20 429.' (reassembled, judged) or no response (dropped)"
  check_range "the origin saw at most the budget" "$(olog_count "$s")" 0 20
  finish
}

# Case 3, a response the appliance cannot frame: /reflect/ copies X-Reflect
# into ten response fields, so 7000 bytes of it make a 70 KB head (the
# appliance frames up to 64 KiB). The connection once switched to
# pass-through and every later request on it went unjudged; now it ends
# there: the origin saw that one request only, and the client's budget
# counts it (19 more admitted on a new connection, then the 429).
t_wire_unframable_response() {
  local s big
  s="$(src4)"
  big="$(head -c 7000 /dev/zero | tr '\0' r)"
  # A client that takes heads of any size and goes on sending, as the
  # attacker's would.
  client rf --source "$s" --count 25 --path '/reflect/{i}' -H "X-Reflect: $big" --max-head 1000000 \
    --body-max 16 --timeout 20
  check_eq "no response on the connection, which ended" "$(res count rf 200)" 0
  check_eq "the connection ended" "$(res expr rf 'all(e.get("peer_closed") or e.get("error") for e in E)')" True
  check_olog "origin: the one request before the end" "$s" 1
  client after --source "$s" --count 25 --path '/after/{i}'
  check_eq "TB01 the rest of the budget: 19 admitted, then the 429" "$(res statuses after)" "200x19 429."
  check_olog "origin: 1 + 19" "$s" 20
  finish
}

# ---------------------------------------------------------------- tb-strict
# (three-budgets with CONNECT and HTTP/2 prior knowledge allowed, and /hk/
# limited to 5 an hour per Host.) The parser's cases: each answered 400 by
# the appliance, the origin never sees them.

# Case 4: RFC 9112 request targets have no fragment. "#x" kept in the path
# matched no rule; in absolute form the junk went into the authority.
t_wire_fragment_in_target() {
  local s
  s="$(src4)"
  client fr --source "$s" --plan '[{"count": 1, "method": "POST", "body": "{}", "path": "/v1/chat/completions#x"},
    {"count": 1, "path": "http://api.example.com#junk/v1/models"}, {"count": 1, "path": "/v1/models?q=1#"}]'
  check_eq "'#' in the target: 400 and the close, three times" "$(res statuses fr)" "400. | 400. | 400."
  check_olog "the origin saw none of them" "$s" 0
  finish
}

# Case 5: RFC 9112 3.2, a Host that is not host[:port] is answered 400.
t_wire_invalid_host() {
  local s
  s="$(src4)"
  client ih --source "$s" --plan '[{"count": 1, "host_header": "a b"}, {"count": 1, "host_header": "a/b"},
    {"count": 1, "host_header": "user@a"}, {"count": 1, "host_header": "a, b"}, {"count": 1, "host_header": "a:xx"},
    {"count": 1, "host_header": "[::1"}, {"count": 1, "host_header": "a:65536"}, {"count": 1, "host_header": "api.example.com"}]'
  check_eq "seven invalid Hosts: 400 each; a valid one: 200" "$(res statuses ih)" \
    "400. | 400. | 400. | 400. | 400. | 400. | 400. | 200"
  check_olog "the origin saw the valid one only" "$s" 1
  finish
}

# Case 5: a rule keyed on the host (/hk/, 5 an hour) sees one host however
# it is spelt: case, a trailing dot, the default port with or without
# leading zeros, an empty port. Five spellings spend the budget, the sixth
# request is refused; another port is another bucket. Before, each spelling
# had a bucket of its own.
t_wire_host_key_spellings() {
  local s
  s="$(src4)"
  client hk --source "$s" --plan '[{"count": 7, "path": "/hk/{i}", "each": [
    {"host_header": "api.example.com"}, {"host_header": "API.Example.COM"}, {"host_header": "api.example.com."},
    {"host_header": "api.example.com:80"}, {"host_header": "api.example.com:0080"},
    {"host_header": "api.example.com:"}, {"host_header": "api.example.com:8080"}]}]'
  check_eq "five spellings admitted, the sixth refused (one bucket), another port admitted" \
    "$(res expr hk '" ".join(str(r["status"]) for r in R)')" "200 200 200 200 200 429 200"
  check_olog "the origin saw the six admitted" "$s" 6
  finish
}

# Case 6: RFC 9110 9.3.6, a CONNECT request has no content. With CONNECT
# allowed, one with Content-Length was framed as having a body.
t_wire_connect_with_content() {
  local s
  s="$(src4)"
  client cc --source "$s" --plan '[{"count": 1, "method": "CONNECT", "path": "198.18.0.20:80", "body": "hello"},
    {"count": 1, "method": "CONNECT", "path": "198.18.0.20:80", "headers": ["Transfer-Encoding: chunked"]}]'
  check_eq "CONNECT with Content-Length, with Transfer-Encoding: 400 each" "$(res statuses cc)" "400. | 400."
  check_olog "the origin saw neither" "$s" 0
  finish
}

# Case 6: with HTTP/2 prior knowledge allowed, "PRI * HTTP/2.0" and its
# empty line once switched the connection to pass-through before the whole
# 24-byte preface was seen; what followed went unjudged. A preface whose
# last six bytes are not "SM\r\n\r\n" is answered 400 and never reaches
# the origin, sent whole or in pieces.
t_wire_h2_preface_partial() {
  local s raw="$SLT_OUT/preface.bin"
  s="$(src4)"
  printf 'PRI * HTTP/2.0\r\n\r\nGET /x HTTP/1.1\r\nHost: a\r\n\r\n' >"$raw"
  client pw --source "$s" --raw-file "$raw" --count 1
  client pp --source "$s" --raw-file "$raw" --count 1 --piece 9 --piece-delay 20 --nodelay
  check_eq "a preface followed by a request: 400" "$(res statuses pw)" "400."
  check_eq "the same in pieces: 400" "$(res statuses pp)" "400."
  check_olog "the origin saw none of it" "$s" 0
  finish
}

# Conversations through the SYN proxy whatever the client's TCP
# offers: timestamps, SACK and window scaling all on (Linux's default), no
# timestamps (so neither window scale nor SACK can travel in the cookie),
# and timestamps without SACK or window scaling, each under 3% loss, 3%
# duplication and 10% reordering: the first 64 KiB of /big arrive
# byte-identical, and a 32 KiB upload is followed on the same connection by
# a request the origin frames where it should (a stream shifted by a byte
# would not). (Sizes and rates a lossy path moves in seconds: the appliance
# drops a segment ahead of the stream it frames, so a loss or a reordering
# costs a sender without SACK a retransmission timeout.)
t_wire_syn_proxy_options() {
  local s variant ts sack ws code out
  s="$(src4)"
  head -c 32768 /dev/urandom >"$SLT_OUT/upload.bin"
  head -c 65536 "$SLT_TMP/nginx/www/big.bin" >"$SLT_OUT/big-head.bin"
  impair_on 3 3 10 10 || { fail "could not set up the impairment"; finish; }
  trap 'impair_off; ip netns exec "$NS_CLI" sysctl -qw net.ipv4.tcp_timestamps=1 net.ipv4.tcp_sack=1 net.ipv4.tcp_window_scaling=1' EXIT
  for variant in "1 1 1" "0 1 1" "1 0 0"; do
    read -r ts sack ws <<<"$variant"
    ip netns exec "$NS_CLI" sysctl -qw net.ipv4.tcp_timestamps="$ts" net.ipv4.tcp_sack="$sack" net.ipv4.tcp_window_scaling="$ws" ||
      { fail "cannot set the client's TCP options ($variant)"; continue; }
    code="$(ccurl "big-$ts$sack$ws" --interface "$s" --max-time 30 -r 0-65535 "http://$ORIGIN4/big")"
    check_eq "timestamps $ts, SACK $sack, window scaling $ws: GET /big, 64 KiB of it" "$code" 206
    cmp -s "$SLT_OUT/big-$ts$sack$ws.body" "$SLT_OUT/big-head.bin" ||
      fail "timestamps $ts, SACK $sack, window scaling $ws: GET /big differs from the origin's file ($(stat -c %s "$SLT_OUT/big-$ts$sack$ws.body" 2>/dev/null) bytes)"
    out="$(ip netns exec "$NS_CLI" curl --noproxy '*' -sS --max-time 30 --interface "$s" -o /dev/null -w '%{http_code} %{num_connects}\n' \
      --data-binary @"$SLT_OUT/upload.bin" -H 'Content-Type: application/octet-stream' "http://$ORIGIN4/echo?up=$ts$sack$ws" \
      --next -s -o "$SLT_OUT/after-$ts$sack$ws.body" -w '%{http_code} %{num_connects}\n' "http://$ORIGIN4/echo?after=$ts$sack$ws" 2>&1 | tr '\n' ' ')"
    check_eq "timestamps $ts, SACK $sack, window scaling $ws: an upload, then a request on the same connection" "$out" "200 1 200 0 "
    grep -qx "uri=/echo?after=$ts$sack$ws" "$SLT_OUT/after-$ts$sack$ws.body" ||
      fail "timestamps $ts, SACK $sack, window scaling $ws: the request after the upload: $(tr '\n' ' ' <"$SLT_OUT/after-$ts$sack$ws.body" | head -c 200)"
  done
  note "$(impair_stats | tr '\n' ';')"
  check_eq "origin log lines: three of each" "$(olog_count "$s")" 9
  [ "$(impair_events)" -gt 0 ] || fail "the impairment dropped or duplicated nothing"
  finish
}

# A spoofed SYN flood: 3000 SYNs a second for 10 s, each from a
# random address of 198.19.0.0/16 (written onto c0 directly, so no client
# stack answers the SYN-ACKs), through the SYN proxy (on by default). During
# it a client opens 40 new connections one after the other: every one is
# connected at once and answered 200 within a second; the origin receives
# exactly those 40 SYNs (counted on its interface), none of the spoofed ones.
t_wire_syn_flood() {
  local s mac passive0 passive1 before after flood counter
  s="$(src4)"
  mac="$(ip -n "$NS_ORG" -br link show o0 | awk '{ print $3 }')"
  passive() { ip netns exec "$NS_ORG" nstat -az TcpPassiveOpens 2>/dev/null | awk '$1 == "TcpPassiveOpens" { print $2 }'; }
  passive0="$(passive)"
  before="$(SLT_CTL --json stats)"
  ip netns exec "$NS_ORG" timeout -k 2 30 "$SLT_PY" "$SLT_HERE/syn_count.py" --iface o0 --src-net 198.19.0.0/16 \
    --seconds 14 >"$SLT_OUT/origin-syns.json" 2>&1 &
  counter=$!
  sleep 0.5
  ip netns exec "$NS_CLI" timeout -k 2 30 "$SLT_PY" "$SLT_HERE/syn_flood.py" --iface c0 --dst-mac "$mac" \
    --dst "$ORIGIN4" --src-net 198.19.0.0/16 --rate 3000 --seconds 10 >"$SLT_OUT/flood.json" 2>&1 &
  flood=$!
  sleep 2
  client legit --source "$s" --connections 40 --count 1 --path '/flood/{c}' --connect-timeout 2 --timeout 30
  wait "$flood"
  wait "$counter"
  after="$(SLT_CTL --json stats)"
  passive1="$(passive)"
  note "flood: $(cat "$SLT_OUT/flood.json"); at the origin: $(cat "$SLT_OUT/origin-syns.json")"
  local sent
  sent="$("$SLT_PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["sent"])' "$SLT_OUT/flood.json" 2>/dev/null || echo 0)"
  check_eq "the flood was sent (at least 25000 SYNs)" "$(( sent >= 25000 ))" 1
  check_eq "legitimate connections answered 200 during the flood" "$(res count legit 200)" 40
  check_eq "legitimate connections: errors" "$(res expr legit 'len(S.get("errors", []))')" 0
  check_eq "legitimate connections slower than 1 s (connect to response)" "$(res expr legit 'sorted(round(r["t"] - e["started"], 3) for e in E for r in R if r["conn"] == e["conn"] and r["t"] - e["started"] > 1.0)')" "[]"
  local origin_syns
  origin_syns="$("$SLT_PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["syns"], d["from_net"])' "$SLT_OUT/origin-syns.json" 2>/dev/null)"
  check_eq "SYNs the origin received (all, spoofed)" "$origin_syns" "40 0"
  check_eq "connections the origin accepted (TcpPassiveOpens)" "$((passive1 - passive0))" 40
  delta() {
    "$SLT_PY" -c 'import json,sys; a=json.loads(sys.argv[1]); b=json.loads(sys.argv[2]); print(int(b["counters"][sys.argv[3]] - a["counters"][sys.argv[3]]))' \
      "$before" "$after" "$1"
  }
  note "appliance: syn_cookies_sent $(delta syn_cookies_sent), validated $(delta syn_cookies_validated), failed $(delta syn_cookies_failed), bound $(delta syn_proxy_bound), flows_created $(delta flows_created)"
  check_eq "SYNs answered with a cookie: the flood's and the 40" "$(delta syn_cookies_sent)" "$((sent + 40))"
  check_eq "cookies validated: the 40" "$(delta syn_cookies_validated)" 40
  check_eq "flows created: the 40" "$(delta flows_created)" 40
  finish
}

# Delayed binding: with the per-host budget of /hk/* spent (5 an
# hour, from one address), a second address opens 10 connections, each
# refused on its first request: the origin sees none of them (no SYN from
# that address on its interface, no accepted connection, no log line).
# Then one connection is refused first and admitted next (curl --next on
# the same connection): only then does the origin accept a connection, and
# its log holds the admitted request alone.
t_wire_unbound_refusal() {
  local s t i code passive0 passive1 passive2 before after counter out
  s="$(src4)"
  t="$(src4 1)"
  passive() { ip netns exec "$NS_ORG" nstat -az TcpPassiveOpens 2>/dev/null | awk '$1 == "TcpPassiveOpens" { print $2 }'; }
  for i in 1 2 3 4 5; do
    code="$(ccurl "spend-$i" --interface "$s" -H 'Host: spent.example' "http://$ORIGIN4/hk/spend-$i")"
    check_eq "spending the host's budget: request $i" "$code" 200
  done
  before="$(SLT_CTL --json stats)"
  passive0="$(passive)"
  ip netns exec "$NS_ORG" timeout -k 2 30 "$SLT_PY" "$SLT_HERE/syn_count.py" --iface o0 --src-net "$t/32" \
    --seconds 6 >"$SLT_OUT/origin-syns.json" 2>&1 &
  counter=$!
  sleep 0.5
  for i in $(seq 1 10); do
    code="$(ccurl "refused-$i" --interface "$t" -H 'Host: spent.example' "http://$ORIGIN4/hk/refused-$i")"
    [ "$code" = 429 ] || fail "a new connection's first request, over the budget: $code (want 429)"
  done
  wait "$counter"
  passive1="$(passive)"
  check_eq "SYNs the origin received from the refused address" \
    "$("$SLT_PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["from_net"])' "$SLT_OUT/origin-syns.json" 2>/dev/null)" 0
  check_eq "connections the origin accepted while the 10 were refused (TcpPassiveOpens)" "$((passive1 - passive0))" 0
  check_olog "the refused address" "$t" 0
  out="$(ip netns exec "$NS_CLI" curl --noproxy '*' -sS --max-time 15 --interface "$t" -o /dev/null -w '%{http_code} %{num_connects}\n' \
    -H 'Host: spent.example' "http://$ORIGIN4/hk/refused-first" \
    --next -s -o /dev/null -w '%{http_code} %{num_connects}\n' "http://$ORIGIN4/admitted-next" 2>&1 | tr '\n' ' ')"
  check_eq "refused, then admitted on the same connection" "$out" "429 1 200 0 "
  passive2="$(passive)"
  after="$(SLT_CTL --json stats)"
  check_eq "connections the origin accepted for it" "$((passive2 - passive1))" 1
  olog_settle
  check_eq "what the origin's log has from the address" "$(olog_lines "$t" | awk '{ print $3 }' | tr '\n' ' ')" "/admitted-next "
  delta() {
    "$SLT_PY" -c 'import json,sys; a=json.loads(sys.argv[1]); b=json.loads(sys.argv[2]); print(int(b["counters"][sys.argv[3]] - a["counters"][sys.argv[3]]))' \
      "$before" "$after" "$1"
  }
  note "appliance: syn_proxy_unbound $(delta syn_proxy_unbound), unbound_answers $(delta unbound_answers), bound $(delta syn_proxy_bound), flows_unbound now $("$SLT_PY" -c 'import json,sys; print(json.loads(sys.argv[1])["tables"]["flows"]["unbound"])' "$after")"
  check_eq "connections accepted unbound" "$(delta syn_proxy_unbound)" 11
  check_eq "requests answered before binding" "$(delta unbound_answers)" 11
  check_eq "connections bound to the origin" "$(delta syn_proxy_bound)" 1
  finish
}

# ---------------------------------------------------------------- tb-deadlines

# A slow-head crowd (slowloris) against a small pool
# (--contexts 16, --contexts-per-client 4; policy deadlines head 3s): 48
# connections from 8 addresses each send the start of a head and then a byte
# every 0.5 s. Meanwhile a keep-alive client and ten new connections from two
# other addresses are all answered 200 (a newcomer takes the context of the
# head slow the longest); every crowd connection ends within its deadlines
# (408 with Connection: close if it held a context, a close if it never got
# one), and the origin sees none of the crowd's requests.
t_wire_slow_head_crowd() {
  local s0 s1 i crowd before after srcs=()
  s0="$(src4 0)" s1="$(src4 1)"
  SLT_CROWD_ADDRS=()
  for i in $(seq 240 247); do SLT_CROWD_ADDRS+=("198.18.0.$i"); done  # past the pools (topology.sh)
  trap 'for a in "${SLT_CROWD_ADDRS[@]}"; do ip -n "$NS_CLI" addr del "$a/24" dev c0 2>/dev/null; done' EXIT
  for a in "${SLT_CROWD_ADDRS[@]}"; do
    ip -n "$NS_CLI" addr add "$a/24" dev c0 || { fail "cannot add the crowd's address $a"; finish; }
    srcs+=(--source "$a")
  done
  before="$(SLT_CTL --json stats)"
  ip netns exec "$NS_CLI" timeout -k 2 30 "$SLT_PY" "$SLT_HERE/slow_crowd.py" --host "$ORIGIN4" "${srcs[@]}" \
    --per-source 6 --trickle 0.5 --duration 10 --out "$SLT_OUT/crowd.jsonl" >"$SLT_OUT/crowd.stdout" 2>&1 &
  crowd=$!
  sleep 1.5
  client keep --source "$s0" --count 20 --path '/crowd-keep/{i}' --timeout 25
  client fresh --source "$s1" --connections 10 --count 1 --path '/crowd-fresh/{c}' --timeout 25
  wait "$crowd"
  after="$(SLT_CTL --json stats)"
  check_eq "a keep-alive client, during the crowd" "$(res statuses keep)" "200x20"
  check_eq "new connections answered 200, during the crowd" "$(res count fresh 200)" 10
  check_eq "new connections: errors" "$(res expr fresh 'len(S.get("errors", []))')" 0
  crowd_expr() { "$SLT_PY" -c 'import json,sys; R=[json.loads(l) for l in open(sys.argv[1])]; C=[r for r in R if "conn" in r]; print(eval(sys.argv[2]))' "$SLT_OUT/crowd.jsonl" "$1"; }
  check_eq "crowd connections" "$(crowd_expr 'len(C)')" 48
  check_eq "crowd connections still open when it stopped (10 s)" "$(crowd_expr 'sum(1 for c in C if c["end"] == "open")')" 0
  check_eq "crowd answers other than 408" "$(crowd_expr 'sorted(set(c["status"] for c in C if c["status"] not in (None, 408)))')" "[]"
  check_eq "crowd 408s without Connection: close" "$(crowd_expr 'sum(1 for c in C if c["status"] == 408 and not c["connection_close"])')" 0
  check_eq "crowd connections that got a 408 (at least the 16 first holders)" "$(crowd_expr 'sum(1 for c in C if c["status"] == 408) >= 16')" True
  # A head's deadline runs from when the appliance took its first byte,
  # which is at most the first head's deadline (3 s) after the handshake.
  check_eq "crowd connections that lasted over 2 x 3 s + 1.5 s" \
    "$(crowd_expr 'sorted(round(c["ended"] - c["connected"], 2) for c in C if c["ended"] - c["connected"] > 7.5)')" "[]"
  local origin_saw=0
  for a in "${SLT_CROWD_ADDRS[@]}"; do origin_saw=$((origin_saw + $(olog_count "$a"))); done
  check_eq "the origin saw none of the crowd's requests" "$origin_saw" 0
  delta() {
    "$SLT_PY" -c 'import json,sys; a=json.loads(sys.argv[1]); b=json.loads(sys.argv[2]); print(int(b["counters"][sys.argv[3]] - a["counters"][sys.argv[3]]))' \
      "$before" "$after" "$1"
  }
  note "appliance: deadline_head $(delta deadline_head), deadline_first_head $(delta deadline_first_head), evicted_slow_head $(delta evicted_slow_head), share_contexts_refused $(delta share_contexts_refused), contexts_exhausted $(delta contexts_exhausted)"
  check_eq "heads answered 408, by deadline or eviction" "$(( $(delta deadline_head) + $(delta evicted_slow_head) ))" "$(crowd_expr 'sum(1 for c in C if c["status"] == 408)')"
  check_eq "the crowd met its share of contexts" "$(( $(delta share_contexts_refused) > 0 ))" 1
  finish
}

# Two workers (--workers 2): 4 parallel connections of 8 requests from one
# address (bare budget 20) get exactly 20 admitted between them; a
# connection either has all 8 admitted or ends with one 429 (after its
# admitted ones) and the close; then a pipelined batch from another address
# crosses its budget as with one worker. The kernel's fanout spreads the
# connections over both workers' queues by their ports; the worker that
# owns the address (rss_owner.h) gets each frame, handed over where it came
# in on the other queue.
t_tb_workers2_budget() {
  local s0 s1
  s0="$(src4 0)" s1="$(src4 1)"
  client par --source "$s0" --connections 4 --count 8 --parallel --path '/w2/{c}/{i}' --timeout 40
  client pipe --source "$s1" --count 26 --mode pipeline --path '/echo?i={i}'
  check_eq "admitted across 4 connections" "$(res count par 200)" 20
  # Per connection: "200x8", or "200xK 429." (K < 8) with the close.
  check_eq "each connection all admitted, or ended by one 429 and the close" "$(res expr par '" | ".join(
    "ok" if [r["status"] for r in R if r["conn"] == e["conn"]] == [200] * 8 or (
      [r["status"] for r in R if r["conn"] == e["conn"]][-1:] == [429]
      and set(r["status"] for r in R if r["conn"] == e["conn"]) <= {200, 429}
      and sum(1 for r in R if r["conn"] == e["conn"] and r["status"] == 429) == 1
      and e.get("peer_closed") and not e.get("error"))
    else "conn %d bad" % e["conn"] for e in E)')" "ok | ok | ok | ok"
  check_eq "refusals closed" "$(res expr par 'sum(1 for r in R if r["status"] == 429 and r["closed"])')" "$(res count par 429)"
  check_eq "no errors" "$(res expr par 'len(S.get("errors", []))')" 0
  check_olog "the 20 admitted only" "$s0" 20
  check_eq "pipelined" "$(res statuses pipe)" "200x20 429."
  check_olog "pipelined: the 20 admitted only" "$s1" 20
  finish
}

# The appliance on DPDK's AF_XDP driver (--af-xdp: an XDP program hands
# each frame of c1 and o1 to sluiced, past the kernel's stack) limits as on
# AF_PACKET: TB01/TB16 curl gets 200 with the four fields; a pipelined batch
# from another address (bare budget 20) gets "200x20 429." and the origin
# logs exactly the 20; the ports are the AF_XDP driver's. Skipped (run.sh)
# where the kernel has no AF_XDP sockets.
t_wire_af_xdp() {
  local s0 s1 code
  s0="$(src4 0)" s1="$(src4 1)"
  check_eq "the ports are AF_XDP's" "$(grep -cE '^  (client|origin) port [0-9]+: net_af_xdp[01] \(net_af_xdp\)' "$SLT_SLUICED_LOG")" 2
  code="$(ccurl xc --interface "$s0" "http://$ORIGIN4/xdp/curl")"
  check_eq "TB01 curl: admitted" "$code" 200
  check_eq "TB16 curl: RateLimit-Limit" "$(chdr xc RateLimit-Limit)" 20
  check_eq "curl: the body" "$(cbody xc)" ok
  client pipe --source "$s1" --count 26 --mode pipeline --path '/echo?xdp={i}'
  check_eq "TB01 pipelined across the budget" "$(res statuses pipe)" "200x20 429."
  check_olog "pipelined: the 20 admitted only" "$s1" 20
  finish
}

# --ports mode, on two DPDK tap ports (net_tap) bridged to the lab's veths:
# a port that verifies checksums on receipt and computes them on transmit
# (the tap driver does both in software, as a NIC would in hardware), where
# AF_PACKET does neither. What the appliance writes itself (the SYN proxy's
# SYN-ACK, the 429) must reach the client with checksums its stack accepts;
# a segment the port found bad is dropped before it is judged.
t_wire_ports_tap() {
  local s0 s1 code
  s0="$(src4 0)" s1="$(src4 1)"
  check_eq "the ports are tap ports whose device verifies checksums" \
    "$(grep -cE '^  (client|origin) port [0-9]+: net_tap[01] \(net_tap\) .*checksums verified by the device$' "$SLT_SLUICED_LOG")" 2
  code="$(ccurl tc --interface "$s1" "http://$ORIGIN4/tap/curl")"
  check_eq "TB01 curl: admitted" "$code" 200
  check_eq "TB16 curl: RateLimit-Limit" "$(chdr tc RateLimit-Limit)" 20
  client pipe --source "$s0" --count 26 --mode pipeline --path '/echo?tap={i}'
  check_eq "TB01 pipelined across the budget: 20, then the appliance's 429" "$(res statuses pipe)" "200x20 429."
  check_olog "pipelined: the 20 admitted only" "$s0" 20
  check_bad_checksums "$s1"
  olog_settle
  check_eq "paths the origin served" "$(olog_lines "$s1" | awk '{ print $3 }' | sort | tr '\n' ' ')" \
    "/badsum/real-ip /badsum/real-tcp /tap/curl "
  finish
}

# TB16 on admitted responses: the appliance inserts each admitted
# request's RateLimit-Limit/-Remaining/-Reset/-Policy into its response
# (right after the status line, the flow's sequence numbers shifted from
# there on). curl sees the four with the limiter's values; a keep-alive
# client sees Remaining count down response by response, pipelined requests
# each get their own values in order; a 1 MiB body arrives byte-identical,
# and 256 KiB of it also through loss, duplication and reordering
# (retransmitted segments are rewritten the same way). tb-hourly: 60 an
# hour, so every value is exact (the impaired part stays well within the
# minute a token takes to come back).
t_tb_admitted_fields() {
  local s code
  s="$(src4)"
  code="$(ccurl af --interface "$s" "http://$ORIGIN4/af/curl")"
  check_eq "curl: admitted" "$code" 200
  check_eq "TB16 curl: RateLimit-Limit" "$(chdr af RateLimit-Limit)" 60
  check_eq "TB16 curl: RateLimit-Remaining" "$(chdr af RateLimit-Remaining)" 59
  check_eq "TB16 curl: RateLimit-Reset" "$(chdr af RateLimit-Reset)" 60
  check_eq "TB16 curl: RateLimit-Policy" "$(chdr af RateLimit-Policy)" "60;w=3600"
  check_eq "curl: the body" "$(cbody af)" ok
  client ka --source "$s" --count 10 --path '/af/ka{i}'
  check_eq "keep-alive: statuses" "$(res statuses ka)" "200x10"
  check_eq "TB16 keep-alive: Remaining counts down on one connection" "$(res remaining ka 58)" ""
  check_eq "TB16 keep-alive: all four on every response" \
    "$(res expr ka 'all(all(h in r["headers"] for h in ("ratelimit-limit", "ratelimit-remaining", "ratelimit-reset", "ratelimit-policy")) for r in R)')" True
  client pl --source "$s" --count 10 --mode pipeline --path '/echo?i={i}'
  check_eq "pipelined: statuses" "$(res statuses pl)" "200x10"
  check_eq "TB16 pipelined: each response its own values, in order" "$(res remaining pl 48)" ""
  check_eq "pipelined: bodies in order" "$(res expr pl '" ".join(r["body"].split("\n")[1] for r in R)')" \
    "$(for i in $(seq 1 10); do printf 'uri=/echo?i=%d ' "$i"; done | sed 's/ $//')"
  code="$(ccurl big --interface "$s" "http://$ORIGIN4/big")"
  check_eq "big: status" "$code" 200
  check_eq "TB16 big: RateLimit-Remaining" "$(chdr big RateLimit-Remaining)" 38
  cmp -s "$SLT_OUT/big.body" "$SLT_TMP/nginx/www/big.bin" || fail "big: the body differs from the origin's file"
  impair_on 5 5 25 10 || { fail "could not set up the impairment"; finish; }
  trap 'impair_off' EXIT
  # 256 KiB of it (a range request, answered 206 and admitted like any
  # other): a whole MiB through 25% reordering costs the origin dozens of
  # RTOs, since the appliance drops segments ahead of the framed stream.
  code="$(ccurl bigi --interface "$s" --max-time 90 -r 0-262143 "http://$ORIGIN4/big")"
  client pli --source "$s" --count 5 --mode pipeline --path '/echo?i={i}' --timeout 60
  note "$(impair_stats | tr '\n' ';')"
  impair_off
  trap - EXIT
  check_eq "impaired range: status" "$code" 206
  check_eq "TB16 impaired range: RateLimit-Remaining" "$(chdr bigi RateLimit-Remaining)" 37
  head -c 262144 "$SLT_TMP/nginx/www/big.bin" | cmp -s "$SLT_OUT/bigi.body" - ||
    fail "impaired range: the body differs from the origin's file ($(stat -c %s "$SLT_OUT/bigi.body") bytes)"
  check_eq "impaired pipelined: statuses" "$(res statuses pli)" "200x5"
  check_eq "TB16 impaired pipelined: own values in order, each charged once" "$(res remaining pli 36)" ""
  check_olog "origin log: every request once" "$s" 28
  finish
}

# Keep-alive refusals (after_answer: keep-alive, the shipped
# default). Once an address's bare budget is spent, a connection that got a
# 429 goes on serving: bare requests (refused, TB14) and credentialed ones
# (admitted against a budget of their own) alternate on one connection, one
# after the other and pipelined, every answer in request order, and the
# origin sees only the admitted ones (a refused request's bytes are cut out
# of the stream). The same through loss, duplication and reordering (a lost
# 429 comes back when the client sends its request again). curl reuses its
# connection after a 429.
t_tb_keepalive_refusal() {
  local s each inorder
  s="$(src4)"
  client spend --source "$s" --count 60 --path '/kr/spend{i}'
  check_eq "the bare budget spent" "$(res statuses spend)" "200x60"
  each='[{"path": "/echo?kr=bare{i}"}, {"path": "/echo?kr=cred{i}", "headers": ["Authorization: Bearer kr-token"]}]'
  # The admitted responses' bodies name their own requests (2, 4, ...).
  inorder='" ".join(r["body"].split("\n")[1] for r in R if r["status"] == 200)'
  client seq --source "$s" --plan "[{\"count\": 6, \"each\": $each}]"
  check_eq "TB14 sequential: refused and admitted alternate on one connection" "$(res statuses seq)" \
    "429 200 429 200 429 200"
  check_eq "sequential: the connection stayed open" "$(res end seq 0 peer_closed)" False
  check_eq "TB14 body" "$(res body seq 1)" "$SLT_TB14_BODY"
  check_eq "the 429 says nothing of closing" "$(res header seq 1 Connection)" ""
  check_eq "TB16 the 429's fields" "$(res header seq 1 RateLimit-Remaining)" 0
  check_eq "sequential: each admitted response its own" "$(res expr seq "$inorder")" \
    "uri=/echo?kr=cred2 uri=/echo?kr=cred4 uri=/echo?kr=cred6"
  client pipe --source "$s" --plan "[{\"count\": 8, \"mode\": \"pipeline\", \"each\": $each}]"
  check_eq "TB14 pipelined: answered in request order" "$(res statuses pipe)" "429 200 429 200 429 200 429 200"
  check_eq "pipelined: each admitted response its own" "$(res expr pipe "$inorder")" \
    "uri=/echo?kr=cred2 uri=/echo?kr=cred4 uri=/echo?kr=cred6 uri=/echo?kr=cred8"
  ip netns exec "$NS_CLI" curl --noproxy '*' -sv --connect-timeout 5 --max-time 15 --interface "$s" \
    -o /dev/null -o /dev/null -w '%{http_code} ' "http://$ORIGIN4/kr/curl-bare" "http://$ORIGIN4/healthz" \
    >"$SLT_OUT/curl2.out" 2>"$SLT_OUT/curl2.err"
  check_eq "curl: a 429, then /healthz" "$(cat "$SLT_OUT/curl2.out")" "429 200 "
  grep -q "Re-using existing connection" "$SLT_OUT/curl2.err" ||
    fail "curl opened a new connection after the 429: $(grep -E '^\* ' "$SLT_OUT/curl2.err" | tr '\n' ' ' | tail -c 400)"
  impair_on 5 5 25 10 || { fail "could not set up the impairment"; finish; }
  trap 'impair_off' EXIT
  client imp --source "$s" --timeout 90 \
    --plan "[{\"count\": 20, \"each\": $each}, {\"count\": 20, \"mode\": \"pipeline\", \"each\": $each}]"
  note "$(impair_stats | tr '\n' ';')"
  impair_off
  trap - EXIT
  note "appliance: $("$(dirname "$SLUICED")/sluicectl" --socket "$SLT_TMP/control.sock" stats 2>&1 | grep -E 'answers_kept_open|kept_answers_resent' | tr -s ' ' | tr '\n' ';')"
  check_eq "impaired: sequential, then pipelined, every answer once and in order" "$(res statuses imp)" \
    "$(printf '429 200 %.0s' $(seq 1 10) | sed 's/ $//') | $(printf '429 200 %.0s' $(seq 1 10) | sed 's/ $//')"
  check_eq "impaired: no errors" "$(res expr imp 'len(S.get("errors", []))')" 0
  check_eq "the origin saw no refused request" "$(olog_lines "$s" | awk '$3 ~ /bare/' | wc -l)" 0
  check_olog "origin log: the 60, the admitted ones and /healthz, once each" "$s" $((60 + 3 + 4 + 1 + 10 + 10))
  finish
}

# DQ05 read from the responses: the origin reports the tokens a
# request used in X-Pi-Usage-Tokens, in the response head or in the trailer
# section after a chunked body; the appliance charges them to the
# deployment's minute when the response ends: 60000 (head) then 50000
# (trailer) on the default quota of 100000, and the next request is refused
# with DQ07's body
# and Retry-After; the origin's responses reach the client unchanged (DQ10:
# no fields inserted).
t_dq_usage_from_response() {
  local s sec dep='X-Pi-Deployment: itest-usage-resp'
  s="$(src4)"
  sec="$(date -u +%-S)"
  if [ "$sec" -ge 50 ]; then
    note "waiting $((61 - sec)) s for the next minute"
    sleep $((61 - sec))
  fi
  client u --source "$s" -H "$dep" --plan '[{"count": 1, "path": "/usage/a?tokens=60000"}, {"count": 1, "path": "/usage-trailer/b?tokens=50000"}, {"count": 1, "path": "/usage/c?tokens=1"}]'
  check_eq "DQ05 under the quota, then over it: the third refused" "$(res statuses u)" "200 | 200 | 429"
  check_eq "the second response was chunked (its tokens in the trailer)" "$(res header u 2 Transfer-Encoding)" chunked
  check_eq "the origin's usage field reaches the client" "$(res header u 1 X-Pi-Usage-Tokens)" 60000
  check_eq "DQ10 no fields inserted" "$(res has-header u 1 RateLimit-Limit)" no
  check_eq "DQ07 body" "$(res body u 3)" "$SLT_DQ07_BODY"
  check_range "DQ07 Retry-After" "$(res header u 3 Retry-After)" 1 60
  check_olog "origin log: the two admitted" "$s" 2
  finish
}

# DQ09: an upstream's own 429 passes through untouched: what the client gets
# through the appliance is what the origin answers directly (status line,
# every field but Date, body), not the appliance's DQ07 answer, with no
# fields added (DQ10); and it leaves the deployment's quota as it was.
t_dq_upstream_429() {
  local s code dep='X-Pi-Deployment: itest-upstream-429'
  s="$(src4)"
  code="$(ccurl up --interface "$s" -H "$dep" "http://$ORIGIN4/upstream-429/x")"
  check_eq "DQ09 the upstream's 429 reaches the client" "$code" 429
  ip netns exec "$NS_ORG" curl --noproxy '*' -sS --max-time 5 -D "$SLT_OUT/direct.headers" -o "$SLT_OUT/direct.body" \
    -H "$dep" "http://$ORIGIN4/upstream-429/x" >/dev/null 2>&1
  check_eq "DQ09 the body unchanged" "$(cbody up)" "$(cbody direct)"
  check_eq "DQ09 the fields unchanged (but Date)" \
    "$(grep -vi '^date:' "$SLT_OUT/up.headers" | tr -d '\r' | tr '\n' '|')" \
    "$(grep -vi '^date:' "$SLT_OUT/direct.headers" | tr -d '\r' | tr '\n' '|')"
  check_eq "DQ10 no fields added" "$(chdr up RateLimit-Limit)" ""
  client after --source "$s" -H "$dep" --count 3 --path '/usage/a?tokens=1'
  check_eq "the deployment's quota untouched" "$(res statuses after)" "200x3"
  check_olog "origin log: the upstream's refusal and the three after it" "$s" 4
  finish
}

# ================================================================ control plane

SLT_CTL() { "$(dirname "$SLUICED")/sluicectl" --socket "$SLT_TMP/control.sock" "$@"; }

# TB01, TB11-TB13 through sluicectl: a run named in a path is 404 until it
# is started (TB12); started with --budget 5 its budget applies from its
# first request (the 6th refused, its 429 saying RateLimit-Limit 5); a second
# run behind the same address has the policy's 600 of its own (TB11); bucket
# show tells what is left; after `run end` returns the next request is bare
# (TB13: 404, counted at 60). Refusals: an unknown run's end (exit 1), a bad token
# (exit 1, invalid_argument), a zero budget (exit 2, never sent).
t_ctl_run_budget() {
  local s0 out rc a="itest-run-a" b="itest-run-b"
  s0="$(src4 0)"
  client pre --source "$s0" --count 1 --path "/vrx/$a/v1/tap"
  check_eq "TB12 before run start: 404" "$(res statuses pre)" "404"
  out="$(SLT_CTL run start "$a" --budget 5 2>&1)"
  check_eq "run start: exit" "$?" 0
  check_eq "run start: said so" "$out" "run $a started"
  out="$(SLT_CTL runs 2>&1)"
  check_eq "runs lists it with its budget" "$(awk -v t="$a" '$1 == t { print $2 }' <<<"$out")" 5
  client ra --source "$s0" --count 6 --path "/vrx/$a/v1/tap/{i}"
  check_eq "TB01 the run's own budget: 5 then 429" "$(res statuses ra)" "200x5 429"
  check_eq "TB16 the 429's RateLimit-Limit is the run's budget" "$(res header ra 6 RateLimit-Limit)" 5
  check_eq "TB16 RateLimit-Policy" "$(res header ra 6 RateLimit-Policy)" "5;w=60"
  check_range "TB15 Retry-After: 60 s / 5" "$(res header ra 6 Retry-After)" 11 12
  SLT_CTL run start "$b" >/dev/null 2>&1
  check_eq "second run start: exit" "$?" 0
  client rb --source "$s0" --count 30 --path "/vrx/$b/v1/tap/{i}"
  check_eq "TB11 the other run behind the same address has its own 600" "$(res statuses rb)" "200x30"
  out="$(SLT_CTL --json bucket show run "$a")"
  check_eq "bucket show: the spent run" \
    "$("$SLT_PY" -c 'import json,sys; d=json.loads(sys.argv[1]); print(d["remaining"], d["refusing"], d["limit"])' "$out")" "0 True 5"
  out="$(SLT_CTL --json bucket show run "$b")"
  check_eq "bucket show: the other run's limit" "$("$SLT_PY" -c 'import json,sys; print(json.loads(sys.argv[1])["limit"])' "$out")" 600
  out="$(SLT_CTL run end "$a" 2>&1)"
  check_eq "run end: exit" "$?" 0
  client post --source "$s0" --count 1 --path "/vrx/$a/v1/tap"
  check_eq "TB13 the request after run end is bare: 404" "$(res statuses post)" "404"
  check_eq "TB13 ... counted at the bare rate" "$(res header post 1 RateLimit-Limit)" 60
  out="$(SLT_CTL run end "$a" 2>&1)"
  rc=$?
  check_eq "ending it again: refused (exit 1)" "$rc" 1
  check_eq "ending it again: not_found" "$(grep -c '(not_found)' <<<"$out")" 1
  out="$(SLT_CTL run start 'bad token!' 2>&1)"
  rc=$?
  check_eq "a bad token: refused (exit 1)" "$rc" 1
  check_eq "a bad token: invalid_argument" "$(grep -c '(invalid_argument)' <<<"$out")" 1
  SLT_CTL run start "$a" --budget 0 >/dev/null 2>&1
  check_eq "a zero budget: usage error (exit 2)" "$?" 2
  SLT_CTL run end "$b" >/dev/null 2>&1
  check_eq "end the other run" "$?" 0
  check_olog "origin log: the 35 admitted run requests only" "$s0" 35
  finish
}

# Budgets across a crash: 15 of tb-small's bare 20 spent, and a live run's
# one request a minute (TB13), then sluiced is killed (SIGKILL) at once and
# started again. The tables live in files in the state directory
# (control/table_file.h) that the new process re-attaches, so nothing is
# given back, not even what no snapshot had yet: 5 more, then 429, and the
# run stays spent.
t_ctl_buckets_crash_before() {
  spend_before_crash crash-run
  finish
}
t_ctl_buckets_crash() {
  check_eq "sluiced said it re-attached the buckets" \
    "$(grep -cE '^sluiced: re-attached [1-9][0-9]* buckets from .*/buckets\.table \(generation [2-9][0-9]*\); nothing given back' "$SLT_SLUICED_LOG")" 1
  check_spent_after_crash crash-run
  finish
}

# The same crash, but the bucket table file left behind is not one this
# sluiced can use: its header says another layout (an upgrade that changed
# it), or its header is damaged. The file is set aside with the reason, and
# the buckets come from the snapshot, which is at most a second older than
# the crash: what was spent 1.2 s before the kill stays spent, and the
# snapshot restored was taken within 1 s of the kill.
t_ctl_buckets_relayout_before() {
  spend_before_crash relayout-run
  sleep 1.2
  finish
}
t_ctl_buckets_relayout() {
  check_set_aside 'layout 9, this sluiced reads layout 1'
  check_snapshot_age
  check_spent_after_crash relayout-run
  finish
}
t_ctl_buckets_damaged_before() {
  spend_before_crash damaged-run
  wait_snapshot_writes 2
  finish
}
t_ctl_buckets_damaged() {
  check_set_aside 'its header is damaged \(checksum\)'
  check_spent_after_crash damaged-run
  finish
}

# spend_before_crash RUN: 15 of the bare budget spent from this test's
# address, and live run RUN (a budget of 1 a minute) spent; the time noted.
spend_before_crash() {
  local s run="$1"
  s="$(src4)"
  client spend --source "$s" --count 15 --path '/bc/{i}'
  check_eq "15 admitted before the crash" "$(res statuses spend)" "200x15"
  SLT_CTL run start "$run" --budget 1 >/dev/null 2>&1 || fail "run start $run"
  client run --source "$s" --count 1 --path "/vrx/$run/v1/x"
  check_eq "the run's one request a minute, before the crash" "$(res statuses run)" "200"
  date +%s >"$SLT_TMP/$run.spent"
}
# wait_snapshot_writes N: N more bucket snapshots written (within 30 s).
wait_snapshot_writes() {
  local i writes=0 last taken
  last="$(SLT_CTL --json status | "$SLT_PY" -c 'import json,sys; print(int(json.load(sys.stdin)["bucket_snapshot"]["taken_at_ns"]))')"
  for ((i = 0; i < 60 && writes < $1; i++)); do
    taken="$(SLT_CTL --json status | "$SLT_PY" -c 'import json,sys; print(int(json.load(sys.stdin)["bucket_snapshot"]["taken_at_ns"]))')"
    [ "$taken" != "$last" ] && { writes=$((writes + 1)); last="$taken"; }
    sleep 0.5
  done
  check_eq "bucket snapshots written after the spending" "$writes" "$1"
}
# check_set_aside WHY: the log says buckets.table was set aside for WHY (an
# ERE) and the buckets restored from the snapshot; the file is there.
check_set_aside() {
  check_eq "sluiced said why it set the table aside" \
    "$(grep -cE "^sluiced: .*/buckets\.table: $1; set aside as .*/buckets\.table\.set-aside; the buckets come from the snapshot" "$SLT_SLUICED_LOG")" 1
  check_eq "sluiced said what it restored" "$(grep -cE '^sluiced: restored [1-9][0-9]* buckets from .*buckets.snapshot' "$SLT_SLUICED_LOG")" 1
  check_eq "the set-aside file kept" "$([ -f "$SLT_TMP/state/buckets.table.set-aside" ] && echo yes)" yes
}
# check_snapshot_age: the snapshot restored was taken at most 1 s before
# sluiced was killed (the log gives its time; the kill's is noted).
check_snapshot_age() {
  local taken killed
  taken="$(sed -nE 's/^sluiced: restored [0-9]+ buckets from .*, at ([0-9.]+) UTC seconds\).*/\1/p' "$SLT_SLUICED_LOG")"
  killed="$(cat "$SLT_TMP/killed_at" 2>/dev/null)"
  check_eq "the snapshot restored was taken within 1 s of the crash (taken ${taken:-?}, killed ${killed:-?})" \
    "$(awk -v t="${taken:-0}" -v k="${killed:-1e12}" 'BEGIN { print (k - t <= 1.0 && k >= t) ? "yes" : "no" }')" yes
}
# check_spent_after_crash RUN: TB01 5 more of the 20, then 429; the run
# still spent within the minute its one request refills in.
check_spent_after_crash() {
  local s run="$1" spent elapsed
  s="$(src4)"
  client after --source "$s" --count 6 --path '/bc/after{i}'
  check_eq "TB01 the spent budget stayed spent across the crash: 5 more, then 429" "$(res statuses after)" "200x5 429."
  spent="$(cat "$SLT_TMP/$run.spent" 2>/dev/null || echo 0)"
  client run --source "$s" --count 1 --path "/vrx/$run/v1/y"
  elapsed=$(($(date +%s) - spent))
  if [ "$elapsed" -lt 55 ]; then
    check_eq "TB13 the run's spent budget stayed spent across the crash (${elapsed}s after it was spent)" \
      "$(res statuses run)" "429."
  else
    note "the run's check skipped: ${elapsed}s since it was spent, its budget may have refilled"
  fi
  SLT_CTL run end "$run" >/dev/null 2>&1
}

# Connection adoption across a crash: keep-alive connections that were open
# when sluiced was killed (SIGKILL), and that the new one cannot carry on
# (the flow file left behind is of a layout it does not read: set aside),
# are adopted at their next request head, not reset. Before the crash keepalive_across.py (in the
# background, from this test's address) opens 4 keep-alive connections with
# a GET on each (200), and a fifth whose POST is mid-body (1000 of its
# 100000 bytes sent; the origin answers it at once, before the body), then
# waits for a go file. After the restart, on the very same sockets (it never
# reconnects): a second, then a third GET on each of the 4 is admitted (200,
# with TB16's four RateLimit fields, tb-small's Limit 20) and reaches the
# origin once; the rest of the POST's body, of which the new sluiced cannot
# know where in the stream it is, gets no response: the connection is reset
# or closed. stats counts at least the 4 in flows_adopted. 13 requests in
# all: within the bare 20 whether or not the snapshot before the crash held
# the first 5.
adopt_files() {  # [TEST] the helper's files: pid and go file under $SLT_TMP, its JSON in $SLT_OUT
  local t="${1:-wire-adopt-restart}"
  ADOPT_PID="$SLT_TMP/$t.pid" ADOPT_GO="$SLT_TMP/$t.go"
  ADOPT_READY="$SLT_OUT/across-before.json" ADOPT_OUT="$SLT_OUT/across.json"
}
# adopt_alive PID: that process is alive (not a zombie).
adopt_alive() {
  local state
  state="$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)"
  [ -n "$state" ] && [ "$state" != Z ]
}
# adopt_running PID: that process is alive (not a zombie) and is keepalive_across.py.
adopt_running() {
  local state
  state="$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)"
  [ -n "$state" ] && [ "$state" != Z ] && tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | grep -q keepalive_across.py
}
# adopt_stop: the helper killed by its pid if it still runs (TERM, then KILL).
adopt_stop() {
  local pid i
  pid="$(cat "$ADOPT_PID" 2>/dev/null)"
  [ -n "$pid" ] || return 0
  if adopt_running "$pid"; then
    kill -TERM "$pid" 2>/dev/null
    for ((i = 0; i < 20; i++)); do adopt_running "$pid" || break; sleep 0.1; done
    adopt_running "$pid" && kill -KILL "$pid" 2>/dev/null
  fi
  rm -f "$SLT_TMP/pids/$pid" "$ADOPT_PID"
}
# across FILE PYEXPR: evaluates PYEXPR on the helper's JSON (D), C its kept
# connections, M the mid-body one, st(r) a request's status or "!how it ended".
across() {
  "$SLT_PY" -c 'import json,sys
D=json.load(open(sys.argv[1])); C=D.get("connections", []); M=D.get("mid_body") or {}
st=lambda r: str(r["status"]) if r["end"] == "answered" else "!" + str(r["end"])
print(eval(sys.argv[2]))' "$1" "$2" 2>&1 | tail -n 1
}
# across_start TEST ARGS...: keepalive_across.py started in the background
# (from this test's address, to the origin, with ARGS and the go, ready and
# out files adopt_files names), and waited for, at most 30 s, until it has
# written what it saw before the restart; fails and finishes if it has not.
across_start() {
  local t="$1" pid i
  shift
  adopt_files "$t"
  rm -f "$ADOPT_GO" "$ADOPT_READY" "$ADOPT_OUT" "$ADOPT_PID"
  ip netns exec "$NS_CLI" "$SLT_PY" "$SLT_HERE/keepalive_across.py" --host "$ORIGIN4" --source "$(src4)" "$@" \
    --go "$ADOPT_GO" --wait-go 120 --timeout 5 --ready "$ADOPT_READY" --out "$ADOPT_OUT" \
    >"$SLT_OUT/across.stdout" 2>&1 &
  pid=$!   # `ip netns exec` execs in place: the helper's own pid
  echo "$pid" >"$ADOPT_PID"
  slt_track_pid "$pid"
  for ((i = 0; i < 300; i++)); do
    [ -s "$ADOPT_READY" ] && break
    # (Alive, not yet necessarily keepalive_across.py: `ip netns exec` may
    # not have exec'ed it yet, and adopt_running's name check would stop
    # the wait at once.)
    adopt_alive "$pid" || break
    sleep 0.1
  done
  if [ ! -s "$ADOPT_READY" ]; then
    fail "keepalive_across.py wrote nothing within 30 s (pid $pid; $(adopt_running "$pid" && echo running || echo ended)); it got as far as: $(tail -n 3 "$SLT_OUT/across.stdout" 2>/dev/null | tr '\n' ';' | tail -c 400)"
    note "keepalive_across.py's steps: $(tr '\n' ';' <"$SLT_OUT/across.stdout" 2>/dev/null | head -c 2000)"
    note "appliance counters: $(SLT_CTL --json stats 2>&1 | "$SLT_PY" -c 'import json,sys; c=json.load(sys.stdin)["counters"]; print(", ".join("%s %s" % (k, int(v)) for k, v in sorted(c.items()) if v))' 2>&1 | head -c 3000)"
    adopt_stop
    finish
  fi
}
# across_go TEST: after the restart, the go file for the helper across_start
# started, and a wait (at most 90 s: its requests and the body's rest, each
# send and read bounded by 5 s) until it has written its results; fails and
# finishes if it is not running or wrote none.
across_go() {
  local pid i
  adopt_files "$1"
  pid="$(cat "$ADOPT_PID" 2>/dev/null)"
  if [ -z "$pid" ] || ! adopt_running "$pid"; then
    fail "keepalive_across.py from before the restart is not running (pid '$pid'; the phase before the restart runs only when sluiced is the appliance): $(tail -n 3 "$SLT_OUT/across.stdout" 2>/dev/null | tr '\n' ' ' | tail -c 300)"
    adopt_stop
    finish
  fi
  trap adopt_stop EXIT
  : >"$ADOPT_GO"
  for ((i = 0; i < 900; i++)); do
    adopt_running "$pid" || break
    sleep 0.1
  done
  adopt_running "$pid" && fail "keepalive_across.py still ran 90 s after the go file (killed)"
  adopt_stop
  trap - EXIT
  if [ ! -s "$ADOPT_OUT" ]; then
    fail "keepalive_across.py wrote no results: $(tail -n 3 "$SLT_OUT/across.stdout" 2>/dev/null | tr '\n' ' ' | tail -c 300)"
    finish
  fi
}
t_wire_adopt_restart_before() {
  across_start wire-adopt-restart --connections 4 --path '/adopt/c{c}/r{i}' --post-path /adopt/mid-body \
    --body-length 100000 --partial 1000
  note "before the restart: $(tr -d ' \n' <"$ADOPT_READY" | head -c 1500)"
  check_eq "before the restart: keepalive_across.py's errors" "$(across "$ADOPT_READY" 'D["errors"]')" "[]"
  check_eq "before the restart: the first GET on each of the 4 keep-alive connections" \
    "$(across "$ADOPT_READY" '" ".join(st(r) for c in C for r in c["requests"])')" "200 200 200 200"
  check_eq "before the restart: the POST head and 1000 of its 100000 body bytes sent (mid-body)" \
    "$(across "$ADOPT_READY" 'M.get("body_sent_before")')" 1000
  note "the origin's early answer to the mid-body POST: $(across "$ADOPT_READY" 'M.get("early")')"
  failed && adopt_stop
  finish
}
t_wire_adopt_restart() {
  local s after want
  s="$(src4)"
  across_go wire-adopt-restart
  after="$(SLT_CTL --json stats)"
  note "after the restart: $(tr -d ' \n' <"$ADOPT_OUT" | head -c 3000)"
  note "appliance: $("$SLT_PY" -c 'import json,sys; c=json.loads(sys.argv[1])["counters"]; print(", ".join("%s %s" % (k, int(c.get(k, 0))) for k in ("flows_adopted", "adoption_failed", "adopted_reset", "untracked_reset")))' "$after" 2>&1)"
  check_eq "keepalive_across.py's errors" "$(across "$ADOPT_OUT" 'D["errors"]')" "[]"
  check_eq "the helper opened no connection after the restart (4 kept and the mid-body one, before it)" \
    "$(across "$ADOPT_OUT" 'D["connects"]')" 5
  check_eq "after the restart: the 2nd and 3rd GET on each of the 4 kept connections, on the same socket (no reconnect)" \
    "$(across "$ADOPT_OUT" '" | ".join(" ".join(st(r) for r in c["requests"] if r["i"] > 1) for c in C)')" \
    "200 200 | 200 200 | 200 200 | 200 200"
  check_eq "after the restart: those responses from the same local port as the first (the same connection)" \
    "$(across "$ADOPT_OUT" 'sum(1 for c in C for r in c["requests"] if r["i"] > 1 and r["end"] == "answered" and r["local_port"] == c["local_port"])')" 8
  check_eq "after the restart: none of them announced a close" \
    "$(across "$ADOPT_OUT" 'sum(1 for c in C for r in c["requests"] if r["i"] > 1 and r["close_announced"])')" 0
  check_eq "TB16 after the restart: all four RateLimit fields on each of the 8 (admitted by the new sluiced)" \
    "$(across "$ADOPT_OUT" 'sum(1 for c in C for r in c["requests"] if r["i"] > 1 and len(r["ratelimit"]) == 4)')" 8
  check_eq "TB16 after the restart: their RateLimit-Limit (tb-small's bare 20)" \
    "$(across "$ADOPT_OUT" '" ".join(r["ratelimit"].get("ratelimit-limit", "-") for c in C for r in c["requests"] if r["i"] > 1)')" \
    "20 20 20 20 20 20 20 20"
  check_eq "after the restart, the rest of the mid-body POST's body: no response (its place in the stream is unknown)" \
    "$(across "$ADOPT_OUT" 'M.get("status")')" None
  check_re "after the restart, the mid-body connection: reset or closed" "$(across "$ADOPT_OUT" 'M.get("end")')" '^(reset|closed)$'
  local adopted
  adopted="$("$SLT_PY" -c 'import json,sys; print(int(json.loads(sys.argv[1])["counters"].get("flows_adopted", 0)))' "$after" 2>&1)"
  [[ "$adopted" =~ ^[0-9]+$ ]] && [ "$adopted" -ge 4 ] ||
    fail "stats: flows_adopted (the 4 kept connections): got '$(shown "$adopted")', want at least 4"
  olog_settle
  want="$(for c in 0 1 2 3; do printf '/adopt/c%d/r2\n/adopt/c%d/r3\n' "$c" "$c"; done | sort | tr '\n' ' ' | sed 's/ $//')"
  check_eq "the origin got each GET after the restart once" \
    "$(olog_lines "$s" | awk '$3 ~ /^\/adopt\/c[0-9]+\/r[23]$/ { print $3 }' | sort | tr '\n' ' ' | sed 's/ $//')" "$want"
  finish
}

# A crash under load: load_across.py (in the background, from this test's
# address) keeps 8 keep-alive connections busy, one GET after another,
# blowing through tb-hourly's bare budget of 60 an hour in its first
# moments; sluiced is killed (SIGKILL) while it runs (each connection has
# had 40 answers, nearly all 429: refusals answered on the open connection,
# their answers kept for a retransmission) and started again; the load goes
# on 5 s more. Nothing is reset or closed: every connection goes on to the
# end on the same socket, answered after the restart too (a request sent in
# the gap waits for TCP to send it again), with no admission given back (60
# 200s in all, and the origin served exactly those 60), TB14's 429s after
# the restart. The binary before the flow file reset every connection.
# Under this load the worker is busy most of the time, so a kill often
# lands inside a change: that flow goes on as it was before the segment (its
# undo copy, dataplane/change_undo.h), and sluiced's log says so ("1 taken
# back to before the segment the process died in"); the binary before the
# undo copy reset it (1 connection in about 1 run of 10).
#
# wire-upgrade-under-load is the same load across a clean stop (SIGTERM, what
# `systemctl restart` and a package upgrade do) and a start, the same binary
# standing in for the new one: the stopping process writes its snapshot and
# leaves the flow file to the next, which carries every connection on; a
# clean stop is between two changes, so there no connection may be reset.
t_wire_restart_under_load_before() { under_load_before; }
t_wire_upgrade_under_load_before() { under_load_before; }
t_wire_restart_under_load() { under_load_after "the crash"; }
t_wire_upgrade_under_load() { under_load_after "the stop"; }
under_load_before() {
  local pid i
  LOAD_READY="$SLT_TMP/load-ready.json" LOAD_OUT="$SLT_TMP/load-out.json"
  rm -f "$LOAD_READY" "$LOAD_OUT"
  ip netns exec "$NS_CLI" "$SLT_PY" "$SLT_HERE/load_across.py" --host "$ORIGIN4" --source "$(src4)" \
    --connections 8 --path '/load/c{c}/r{i}' --duration 9 --ready-after 40 --timeout 10 \
    --ready "$LOAD_READY" --out "$LOAD_OUT" >"$SLT_OUT/load.stdout" 2>&1 &
  pid=$!
  echo "$pid" >"$SLT_TMP/load.pid"
  slt_track_pid "$pid"
  for ((i = 0; i < 100; i++)); do
    [ -s "$LOAD_READY" ] && break
    sleep 0.05
  done
  [ -s "$LOAD_READY" ] || fail "load_across.py said nothing within 5 s: $(tail -n 3 "$SLT_OUT/load.stdout" 2>/dev/null | tr '\n' ' ' | tail -c 300)"
  note "before the restart: $(tr -d ' \n' <"$LOAD_READY" | head -c 1500)"
  check_eq "before the restart: every connection busy and past the budget (none ended)" \
    "$(load_json "$LOAD_READY" 'sum(1 for c in C if c["end"] is None and c["answers"].get("429", 0) > 0)')" 8
  finish
}
# under_load_after WHAT: the checks after the restart; WHAT names the event.
under_load_after() {
  local s pid i what="$1" log
  s="$(src4)"
  LOAD_OUT="$SLT_TMP/load-out.json"
  pid="$(cat "$SLT_TMP/load.pid" 2>/dev/null)"
  for ((i = 0; i < 300; i++)); do
    [ -s "$LOAD_OUT" ] && break
    sleep 0.1
  done
  [ -s "$LOAD_OUT" ] || { fail "load_across.py (pid ${pid:-?}) wrote no results within 30 s"; finish; }
  note "after the restart: $(tr -d ' \n' <"$LOAD_OUT" | head -c 2500)"
  note "sluiced: $(grep -E '^sluiced: (warning: )?carried on' "$SLT_SLUICED_LOG" | tail -n 1)"
  note "the longest a request waited for its answer (across $what and the start): $(load_json "$LOAD_OUT" 'max(c["longest_wait_s"] for c in C)') s"
  check_eq "load_across.py's errors" "$(load_json "$LOAD_OUT" 'D["errors"]')" "[]"
  log="$(grep -E '^sluiced: (warning: )?carried on' "$SLT_SLUICED_LOG" | tail -n 1)"
  check_re "sluiced's log: nothing reset" "$log" '; none reset$'
  check_eq "every connection went on to the end on its socket: none reset, closed or timed out" \
    "$(load_json "$LOAD_OUT" '" ".join(str(c["end"]) for c in C)')" "done done done done done done done done"
  check_eq "every connection that went on answered after the restart too (TB14: 429, the budget spent)" \
    "$(load_json "$LOAD_OUT" 'sum(1 for c in C if c["end"] == "done" and c["after_ready"].get("429", 0) > 0)')" 8
  check_eq "TB01 no admission given back: 60 answered 200 in all, before and after $what" \
    "$(load_json "$LOAD_OUT" 'sum(c["answers"].get("200", 0) for c in C)')" 60
  olog_settle
  check_eq "the origin served those 60 and nothing else of the load" \
    "$(awk -v a="$s" '$1 == a && $3 ~ /^\/load\// { n++ } END { print n + 0 }' "$(SLT_ACCESS_LOG)")" 60
  check_eq "answers only 200 or 429" \
    "$(load_json "$LOAD_OUT" 'sorted(set(k for c in C for k in c["answers"]))')" "['200', '429']"
  finish
}
# load_json FILE PYEXPR: PYEXPR on load_across.py's JSON (D), C its connections.
load_json() {
  "$SLT_PY" -c 'import json,sys
D=json.load(open(sys.argv[1])); C=D.get("connections", [])
print(eval(sys.argv[2]))' "$1" "$2" 2>&1
}

# A crash with connections parked inside a body, under a policy that leaves
# adoption off (the default). 18 keep-alive connections each sent a POST head
# announcing a 26-byte body and none of it when sluiced was killed; after the
# restart each sends "GET /healthz HTTP/1.1\r\nX: " (26 bytes: to the origin,
# the body) and "GET /v1/smugN ..." after it. An appliance that adopted the
# connection at that "head" would judge an exempt /healthz while nginx served
# /v1/smugN (20 of 20 when adoption was on by default). The flow file keeps
# each connection's parse context: the new sluiced carries every one on
# inside its body, forwards the 26 bytes as body and judges /v1/smugN, the
# request nginx would serve, against tb-small's budget, which the 20
# requests before the crash spent: 429 on each, nothing reset, nothing
# smuggled. The keep-alive connection, between requests at the crash,
# carries on too (wire-restart-carry).
t_wire_restart_parked_body_before() {
  across_start wire-restart-parked-body --connections 1 --path '/parked/c{c}/r{i}' --post-path /parked/mid-body \
    --body-length 100000 --partial 1000 --smuggle 18 --smuggle-path '/v1/smug{c}' --mid-get /parked/mid/after
  check_eq "before the restart: keepalive_across.py's errors" "$(across "$ADOPT_READY" 'D["errors"]')" "[]"
  check_eq "before the restart: connections parked inside a 26-byte body" \
    "$(across "$ADOPT_READY" 'len(D["smuggled"])')" 18
  check_eq "before the restart: the parked POSTs answered early by the origin (admitted: 20 requests, tb-small's budget)" \
    "$(across "$ADOPT_READY" '" ".join(sorted(set(str(r["early"]["status"]) for r in D["smuggled"])))')" 200
  failed && adopt_stop
  finish
}
t_wire_restart_parked_body() {
  local s after
  s="$(src4)"
  across_go wire-restart-parked-body
  after="$(SLT_CTL --json stats)"
  note "after the restart: $(tr -d ' \n' <"$ADOPT_OUT" | head -c 3000)"
  note "appliance: $("$SLT_PY" -c 'import json,sys; c=json.loads(sys.argv[1])["counters"]; print(", ".join("%s %s" % (k, int(c.get(k, 0))) for k in ("flows_adopted", "untracked_reset", "requests", "exempt")))' "$after" 2>&1)"
  check_eq "keepalive_across.py's errors" "$(across "$ADOPT_OUT" 'D["errors"]')" "[]"
  check_eq "TB01 parked connections carried on inside their body: the request after the body judged against the spent budget (429 on each of 18)" \
    "$(across "$ADOPT_OUT" '" ".join(sorted(set("%s/%s" % (r["end"], r["status"]) for r in D["smuggled"])))') x$(across "$ADOPT_OUT" 'sum(1 for r in D["smuggled"] if r["status"] == 429)')" "answered/429 x18"
  check_eq "the mid-body POST's connection carried on: the rest of its body, then a GET judged against the spent budget" \
    "$(across "$ADOPT_OUT" '"%s %s %s" % (M.get("rest_send"), M.get("end"), M.get("status"))')" "sent answered 429"
  # (Other tests' connections may be in the state directory's flow file too.)
  check_re "sluiced's log: it carried on at least the 20 connections, 19 of them inside a request" \
    "$(grep -oE '^sluiced: (warning: )?carried on [0-9]+ connections \([0-9]+ inside a request or response\)' "$SLT_SLUICED_LOG" | tail -n 1)" \
    'carried on ([2-9][0-9]|[1-9][0-9]{2,}) connections \((19|[2-9][0-9]|[1-9][0-9]{2,}) inside'
  check_re "TB01 the kept-alive connection, between requests at the crash, carried on: its next GET judged by the new sluiced against the spent budget (429, then closed: after_answer close)" \
    "$(across "$ADOPT_OUT" '" ".join(st(r) for c in C for r in c["requests"] if r["i"] > 1)')" '^429 !'
  check_eq "stats: flows_adopted (adoption is off by default)" \
    "$("$SLT_PY" -c 'import json,sys; print(int(json.loads(sys.argv[1])["counters"].get("flows_adopted", 0)))' "$after" 2>&1)" 0
  olog_settle
  check_eq "requests the origin served from a parked connection's body (/v1/smug*)" \
    "$(olog_lines "$s" | awk '$3 ~ /^\/v1\/smug/' | wc -l)" 0
  finish
}

# Connections carried across a crash (the flow file, control/flow_file.h):
# before sluiced is killed (SIGKILL), keepalive_across.py opens 4 keep-alive
# connections with a GET on each (200), 3 it sends nothing on (accepted by
# the SYN proxy, not yet bound to the origin), 2 that send half a GET head
# (held by sluiced, which acknowledges it: the bytes exist nowhere else),
# one whose POST is mid-body (1000 of 100000 bytes; the origin answers it
# early), and the first kept connection sends half its second GET's head.
# After the restart, on the very same sockets: a 2nd and 3rd GET on each of
# the 4 (the first one's 2nd finishing its head), a first GET on each of
# the 3, and the rest of the 2 heads are answered 200, none adopted
# (tb-small leaves adoption off: an unknown connection would be reset), and
# the budget they are charged to went on from where it was (TB01: 5 of the
# 20 spent before, so no Remaining above 14). The mid-body connection
# carries on inside its body (its parse context is in the flow file): the
# other 99000 bytes go through, and a GET after them is answered 200. The
# origin serves each request once, the split heads whole. sluiced says it
# carried all 10, four inside a request, and reset none. The binary before
# the flow file reset every one of them; the one before held heads were in
# the file reset the 3 split ones.
t_wire_restart_carry_before() {
  across_start wire-restart-carry --connections 4 --unbound 3 --split-head 2 --split-kept 1 \
    --path '/carry/c{c}/r{i}' --post-path /carry/mid-body --body-length 100000 --partial 1000 --mid-get /carry/mid/after
  note "before the restart: $(tr -d ' \n' <"$ADOPT_READY" | head -c 1500)"
  check_eq "before the restart: keepalive_across.py's errors" "$(across "$ADOPT_READY" 'D["errors"]')" "[]"
  check_eq "before the restart: the first GET on each of the 4 keep-alive connections" \
    "$(across "$ADOPT_READY" '" ".join(st(r) for c in C for r in c["requests"])')" "200 200 200 200"
  check_eq "before the restart: 3 connections open with nothing sent" "$(across "$ADOPT_READY" 'len(D["unbound"])')" 3
  check_eq "before the restart: 2 connections with half a head sent, no answer yet" \
    "$(across "$ADOPT_READY" '" ".join("%d:%s" % (len(c["requests"]), c.get("local_port") is not None) for c in D["split"])')" "0:True 0:True"
  check_eq "before the restart: the POST mid-body" "$(across "$ADOPT_READY" 'M.get("body_sent_before")')" 1000
  failed && adopt_stop
  finish
}
t_wire_restart_carry() {
  local s after carried want n inside
  s="$(src4)"
  across_go wire-restart-carry
  after="$(SLT_CTL --json stats)"
  note "after the restart: $(tr -d ' \n' <"$ADOPT_OUT" | head -c 3000)"
  note "sluiced: $(grep -E '^sluiced: (warning: )?carried on' "$SLT_SLUICED_LOG" | tail -n 1)"
  check_eq "keepalive_across.py's errors" "$(across "$ADOPT_OUT" 'D["errors"]')" "[]"
  check_eq "no connection opened after the restart (4 kept, 3 unbound, 2 split, the mid-body one, before it)" \
    "$(across "$ADOPT_OUT" 'D["connects"]')" 10
  check_eq "after the restart: the 2nd and 3rd GET on each of the 4 kept connections, on the same socket" \
    "$(across "$ADOPT_OUT" '" | ".join(" ".join(st(r) for r in c["requests"] if r["i"] > 1) for c in C)')" \
    "200 200 | 200 200 | 200 200 | 200 200"
  check_eq "after the restart: the first GET on each of the 3 connections unbound at the crash" \
    "$(across "$ADOPT_OUT" '" ".join(st(r) for c in D["unbound"] for r in c["requests"])')" "200 200 200"
  check_eq "after the restart: the GETs whose heads were held at the crash (2 new connections' first, the first kept connection's second), finished and answered on the same socket" \
    "$(across "$ADOPT_OUT" '" ".join("%s:%s" % (st(r), r["local_port"] == c["local_port"]) for c in D["split"] + C[:1] for r in c["requests"] if r["split"])')" "200:True 200:True 200:True"
  check_eq "after the restart: those 11 from the same local port as their connection's first (no reconnect)" \
    "$(across "$ADOPT_OUT" 'sum(1 for c in C + D["unbound"] for r in c["requests"] if r["end"] == "answered" and r["local_port"] == c["local_port"] and (r["i"] > 1 or c in D["unbound"]))')" 11
  check_eq "TB01 the budget went on from where it was: no RateLimit-Remaining above 14 after the restart (5 of 20 spent before)" \
    "$(across "$ADOPT_OUT" 'sum(1 for c in C + D["unbound"] + D["split"] for r in c["requests"] if (r["i"] > 1 or c not in C) and int(r["ratelimit"].get("ratelimit-remaining", "99")) > 14)')" 0
  check_eq "stats: flows_adopted (adoption is off: the connections were carried, not adopted)" \
    "$("$SLT_PY" -c 'import json,sys; print(int(json.loads(sys.argv[1])["counters"].get("flows_adopted", 0)))' "$after" 2>&1)" 0
  check_eq "after the restart, the mid-body connection: the rest of its body sent, then a GET answered on the same socket" \
    "$(across "$ADOPT_OUT" '"%s %s %s %s" % (M.get("rest_send"), M.get("rest_sent"), M.get("end"), M.get("status"))')" "sent 99000 answered 200"
  # (Other tests' connections may be in the state directory's flow file too.)
  carried="$(grep -oE '^sluiced: (warning: )?carried on [0-9]+ connections? \([0-9]+ inside a request or response\) from .*/flows\.table \(generation [2-9][0-9]*\)' "$SLT_SLUICED_LOG" | tail -n 1 | sed -E 's/.*carried on ([0-9]+) connections? \(([0-9]+) .*/\1 \2/')"
  read -r n inside <<<"$carried"
  [[ "${n:-}" =~ ^[0-9]+$ ]] && [ "$n" -ge 10 ] && [ "${inside:-0}" -ge 4 ] ||
    fail "sluiced's log: 'carried on N connections (M inside a request or response) from .../flows.table (generation 2 or more)' with N at least 10, M at least 4: got '$(shown "$carried")'"
  olog_settle
  want="$(for c in 0 1 2 3; do printf '/carry/c%d/r2\n/carry/c%d/r3\n' "$c" "$c"; done; for c in 4 5 6 7 8; do printf '/carry/c%d/r1\n' "$c"; done; echo /carry/mid/after)"
  want="$(sort <<<"$want" | tr '\n' ' ' | sed 's/ $//')"
  check_eq "the origin got each request after the restart once" \
    "$(olog_lines "$s" | awk '$3 ~ /^\/carry\/c[0-9]+\/r[0-9]$/ && $3 !~ /r1$/ || $3 ~ /^\/carry\/c[45678]\/r1$/ || $3 == "/carry/mid/after" { print $3 }' | sort | tr '\n' ' ' | sed 's/ $//')" "$want"
  finish
}

# A kill in the middle of a change (dataplane/change_undo.h). sluiced runs
# with SLUICE_TEST_DIE_IN_CHANGE=3: its worker kills the process (SIGKILL)
# in its third change for a client segment with payload, after the flow
# engine changed the flow, before the segment went on: the moment a kill -9
# under load hits least often and costs most. The harness's probe through
# the new sluiced is change 1 (slt_probe_origin); then keepalive_across.py
# opens one keep-alive connection, GETs /midchange/c0/r1 (change 2: 200),
# and sends the first half of its second GET's head (change 3: sluiced
# holds it, and dies before its acknowledgement leaves). The restarted
# sluiced carries the flow on as it was before that segment, the client's
# stack sends the half head again, and after the restart the rest of it and
# a third GET are answered 200 on the same socket; the origin serves each
# request once. The binary before the undo copy reset that connection (it
# was the marked flow).
t_wire_restart_mid_change_before() {
  across_start wire-restart-mid-change --connections 1 --split-kept 1 --no-post --path '/midchange/c{c}/r{i}'
  note "before the restart: $(tr -d ' \n' <"$ADOPT_READY" | head -c 1500)"
  check_eq "before the restart: keepalive_across.py's errors" "$(across "$ADOPT_READY" 'D["errors"]')" "[]"
  check_eq "before the restart: the first GET" "$(across "$ADOPT_READY" '" ".join(st(r) for c in C for r in c["requests"])')" 200
  failed && adopt_stop
  finish
}
t_wire_restart_mid_change() {
  local s
  s="$(src4)"
  across_go wire-restart-mid-change
  note "after the restart: $(tr -d ' \n' <"$ADOPT_OUT" | head -c 3000)"
  note "sluiced: $(grep -E '^sluiced: (warning: )?carried on' "$SLT_SLUICED_LOG" | tail -n 1)"
  check_eq "keepalive_across.py's errors" "$(across "$ADOPT_OUT" 'D["errors"]')" "[]"
  check_eq "no connection opened after the restart" "$(across "$ADOPT_OUT" 'D["connects"]')" 1
  check_eq "after the restart: the GET whose half head the dead process was taking in, then a third, answered on the same socket" \
    "$(across "$ADOPT_OUT" '" ".join("%s:%s" % (st(r), r["local_port"] == c["local_port"]) for c in C for r in c["requests"] if r["i"] > 1)')" \
    "200:True 200:True"
  check_re "sluiced's log: the flow taken back to before the segment the process died in" \
    "$(grep -E '^sluiced: (warning: )?carried on' "$SLT_SLUICED_LOG" | tail -n 1)" \
    '; 1 taken back to before the segment the process died in \(its sender repeats it\)'
  olog_settle
  check_eq "the origin served each request once" \
    "$(olog_lines "$s" | awk '$3 ~ /^\/midchange\// { print $3 }' | sort | tr '\n' ' ' | sed 's/ $//')" \
    "/midchange/c0/r1 /midchange/c0/r2 /midchange/c0/r3"
  finish
}

# A crash while a connection is being bound to its origin (delayed binding,
# the default: the first request judged, charged and stashed, the SYN sent
# in the client's name, the origin's SYN-ACK not yet in). mangle.py on the
# origin's side drops its SYN-ACKs to this test's address, so curl's
# connection stays being bound; sluiced is killed. After the restart the
# SYN-ACKs go through again: the new sluiced carries the flow with its
# stash (the flow file keeps the stashes), sends the SYN again, and the
# stashed request reaches the origin: curl gets 200 on its one connection,
# the origin serves the request once, and it was charged once (TB01: 19
# more of the 20 admitted). Before, the flow was not carried: the
# connection's next segment made it anew through the SYN cookie, and the
# request was judged and charged again.
t_wire_restart_binding_before() {
  local s
  s="$(src4)"
  origin_mangle_on drop-synack --to "$s" || { fail "mangle.py did not start on the origin's side"; finish; }
  ip netns exec "$NS_CLI" timeout -k 2 40 curl -s -o /dev/null -w '%{http_code} %{num_connects}' --interface "$s" \
    --max-time 30 "http://$ORIGIN4/binding/r1" >"$SLT_TMP/binding-curl.out" 2>&1 &
  echo $! >"$SLT_TMP/binding-curl.pid"
  slt_track_pid $!
  sleep 1.5
  note "appliance: $(SLT_CTL --json stats 2>&1 | "$SLT_PY" -c 'import json,sys; c=json.load(sys.stdin)["counters"]; print(", ".join("%s %s" % (k, int(c.get(k, 0))) for k in ("flows_unbound", "syn_proxy_bound", "admitted")))' 2>&1)"
  check_eq "before the kill: the origin's SYN-ACKs to the client dropped (at least one)" \
    "$([ "$(mangle_stat_of o0 dropped)" -ge 1 ] 2>/dev/null && echo yes || echo "no: $(mangle_stat_of o0 dropped)")" yes
  check_eq "before the kill: curl still waits" "$(kill -0 "$(cat "$SLT_TMP/binding-curl.pid")" 2>/dev/null && echo waiting || echo "ended: $(cat "$SLT_TMP/binding-curl.out")")" waiting
  olog_settle
  check_eq "before the kill: the origin served nothing of it" "$(olog_lines "$s" | awk '$3 == "/binding/r1"' | wc -l)" 0
  failed && origin_mangle_off
  finish
}
t_wire_restart_binding() {
  local s pid i
  s="$(src4)"
  origin_mangle_off
  pid="$(cat "$SLT_TMP/binding-curl.pid" 2>/dev/null)"
  for ((i = 0; i < 200; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  note "sluiced: $(grep -E '^sluiced: (warning: )?carried on' "$SLT_SLUICED_LOG" | tail -n 1)"
  note "curl: $(cat "$SLT_TMP/binding-curl.out" 2>&1); the origin's SYN-ACKs dropped: $(mangle_stat_of o0 dropped)"
  check_eq "curl: 200 on the one connection it opened before the kill" "$(cat "$SLT_TMP/binding-curl.out" 2>&1)" "200 1"
  check_re "sluiced's log: nothing reset" "$(grep -E '^sluiced: (warning: )?carried on' "$SLT_SLUICED_LOG" | tail -n 1)" \
    '; none reset$'
  olog_settle
  check_eq "the origin served the request once" "$(olog_lines "$s" | awk '$3 == "/binding/r1"' | wc -l)" 1
  # (The binary before carried no stash: the connection's next segment,
  # its request sent again, completed a new handshake with the same SYN
  # cookie and was judged and charged a second time.)
  client after --source "$s" --count 25 --path '/binding/after/{i}'
  check_eq "TB01 it was charged once: 19 more of the budget of 20 admitted, then the 429" "$(res statuses after)" "200x19 429."
  finish
}

# delta_of BEFORE AFTER COUNTER: a counter's growth between two `sluicectl --json stats`.
delta_of() {
  "$SLT_PY" -c 'import json,sys; a=json.loads(sys.argv[1]); b=json.loads(sys.argv[2]); print(int(b["counters"].get(sys.argv[3], 0) - a["counters"].get(sys.argv[3], 0)))' \
    "$1" "$2" "$3"
}
# origin_nstat COUNTER: the origin namespace's TCP counter (absolute).
origin_nstat() { ip netns exec "$NS_ORG" nstat -az "$1" 2>/dev/null | awk -v c="$1" '$1 == c { print $2 }'; }

# Forged adoption, against a victim: 100 segments with the victim's source
# address, no handshake, each a request head, to 4-tuples the appliance does
# not know. Nothing is charged for a connection that has not proved its
# address: the victim's 20 real requests (tb-small's bare budget of 20) are
# all admitted, and the origin serves none of the forged ones. (Before,
# each forged head was adopted and charged: the victim got 5 of 20.)
t_wire_forged_adoption() {
  local s mac before after
  s="$(src4)"
  mac="$(ip -n "$NS_ORG" -br link show o0 | awk '{ print $3 }')"
  before="$(SLT_CTL --json stats)"
  ip netns exec "$NS_CLI" timeout -k 2 20 "$SLT_PY" "$SLT_HERE/forge.py" adopt --iface c0 --dst-mac "$mac" \
    --dst "$ORIGIN4" --src "$s" --count 100 --seconds 1 --spread --path '/forged/{i}' >"$SLT_OUT/forge.json" 2>&1
  note "forged: $(cat "$SLT_OUT/forge.json")"
  sleep 0.5
  after="$(SLT_CTL --json stats)"
  note "appliance: untracked_reset $(delta_of "$before" "$after" untracked_reset), syn_cookie_early_data $(delta_of "$before" "$after" syn_cookie_early_data), flows_adopted $(delta_of "$before" "$after" flows_adopted), admitted $(delta_of "$before" "$after" admitted)"
  # (A forged segment whose numbers happen to carry a valid recent cookie,
  # about 1 in 16 000, is dropped as data that overtook its handshake.)
  check_eq "forged segments reset as unknown connections, or dropped as early data" \
    "$(( $(delta_of "$before" "$after" untracked_reset) + $(delta_of "$before" "$after" syn_cookie_early_data) ))" 100
  check_eq "forged segments adopted" "$(delta_of "$before" "$after" flows_adopted)" 0
  check_eq "requests charged for the forged segments" "$(delta_of "$before" "$after" admitted)" 0
  client victim --source "$s" --connections 1 --count 20 --path '/victim/{i}'
  check_eq "TB01: the victim's 20 real requests (a budget of 20) after the forgery" "$(res statuses victim)" "200x20"
  olog_settle
  check_eq "forged requests the origin served" "$(olog_lines "$s" | awk '$3 ~ /^\/forged\//' | wc -l)" 0
  finish
}

# The same forgery where the policy turns adoption on: each forged head is
# taken up, but neither parsed nor charged until the origin answers the
# probe, which it does with a RST (no such connection). The victim's budget
# is whole, and the origin serves none of the forged requests.
t_wire_forged_adoption_on() {
  local s mac before after
  s="$(src4)"
  mac="$(ip -n "$NS_ORG" -br link show o0 | awk '{ print $3 }')"
  before="$(SLT_CTL --json stats)"
  ip netns exec "$NS_CLI" timeout -k 2 20 "$SLT_PY" "$SLT_HERE/forge.py" adopt --iface c0 --dst-mac "$mac" \
    --dst "$ORIGIN4" --src "$s" --count 100 --seconds 1 --spread --path '/forged/{i}' >"$SLT_OUT/forge.json" 2>&1
  note "forged: $(cat "$SLT_OUT/forge.json")"
  sleep 0.5
  after="$(SLT_CTL --json stats)"
  note "appliance: flows_adopted $(delta_of "$before" "$after" flows_adopted), adoption_failed $(delta_of "$before" "$after" adoption_failed), adoption_proved $(delta_of "$before" "$after" adoption_proved), syn_cookie_early_data $(delta_of "$before" "$after" syn_cookie_early_data), requests $(delta_of "$before" "$after" requests)"
  check_eq "forged heads probed, or dropped as early data" \
    "$(( $(delta_of "$before" "$after" flows_adopted) + $(delta_of "$before" "$after" syn_cookie_early_data) ))" 100
  check_eq "probes the origin answered with a RST (no such connection): every one" \
    "$(delta_of "$before" "$after" adoption_failed)" "$(delta_of "$before" "$after" flows_adopted)"
  check_eq "adoptions the origin proved" "$(delta_of "$before" "$after" adoption_proved)" 0
  check_eq "request heads parsed for the forged segments" "$(delta_of "$before" "$after" requests)" 0
  client victim --source "$s" --connections 1 --count 20 --path '/victim/{i}'
  check_eq "TB01: the victim's 20 real requests (a budget of 20) after the forgery" "$(res statuses victim)" "200x20"
  olog_settle
  check_eq "forged requests the origin served" "$(olog_lines "$s" | awk '$3 ~ /^\/forged\//' | wc -l)" 0
  finish
}

# Forged adoption as a flood: 5000 such segments in 1 s from 100 spoofed
# sources. The origin answers none of them (before: 4947 resets to probes
# the appliance sent in the spoofed sources' names) and receives at most
# the per-worker allowance of resets for unknown connections (1000 a second,
# bursts of 2000), not one segment each.
t_wire_forged_flood() {
  local mac before after in0 in1 rst0 rst1
  mac="$(ip -n "$NS_ORG" -br link show o0 | awk '{ print $3 }')"
  before="$(SLT_CTL --json stats)"
  in0="$(origin_nstat TcpInSegs)" rst0="$(origin_nstat TcpOutRsts)"
  ip netns exec "$NS_CLI" timeout -k 2 20 "$SLT_PY" "$SLT_HERE/forge.py" adopt --iface c0 --dst-mac "$mac" \
    --dst "$ORIGIN4" --src-net 198.19.7.0/25 --count 5000 --seconds 1 --spread >"$SLT_OUT/forge.json" 2>&1
  sleep 1
  in1="$(origin_nstat TcpInSegs)" rst1="$(origin_nstat TcpOutRsts)"
  after="$(SLT_CTL --json stats)"
  note "forged: $(cat "$SLT_OUT/forge.json"); origin: TcpInSegs +$((in1 - in0)), TcpOutRsts +$((rst1 - rst0)); appliance: untracked_reset $(delta_of "$before" "$after" untracked_reset), untracked_origin_resets_limited $(delta_of "$before" "$after" untracked_origin_resets_limited), flows_adopted $(delta_of "$before" "$after" flows_adopted)"
  # (A few of 5000 frames in a second may be lost before the appliance
  # reads them: the AF_PACKET ring.)
  check_eq "forged segments the appliance reset or dropped: at least 4900 of 5000" \
    "$(( $(delta_of "$before" "$after" untracked_reset) + $(delta_of "$before" "$after" syn_cookie_early_data) >= 4900 ))" 1
  check_eq "forged segments adopted" "$(delta_of "$before" "$after" flows_adopted)" 0
  check_eq "resets the origin sent (it was sent no probe)" "$((rst1 - rst0))" 0
  check_eq "segments the origin received: within the allowance (at most 2000 + 1000/s for ~2 s)" \
    "$(( in1 - in0 <= 4000 ))" 1
  check_eq "resets the allowance kept from the origin: at least 1000" \
    "$(( $(delta_of "$before" "$after" untracked_origin_resets_limited) >= 1000 ))" 1
  finish
}

# blind_rsts NAME OFFSET FLAGS... : forge.py rst, its JSON into $SLT_OUT/NAME.json.
blind_rst() {
  local name="$1"
  shift
  ip netns exec "$NS_CLI" timeout -k 2 60 "$SLT_PY" "$SLT_HERE/forge.py" rst --iface c0 --dst "$ORIGIN4" "$@" \
    >"$SLT_OUT/$name.json" 2>"$SLT_OUT/$name.stderr"
  "$SLT_PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(" ".join(str(x) for x in d["statuses"]), d["end"])' \
    "$SLT_OUT/$name.json" 2>/dev/null || echo "no result: $(tail -c 200 "$SLT_OUT/$name.stderr")"
}

# RFC 5961 on a new connection (through the SYN proxy, not yet bound to the
# origin): a RST 100 000 bytes before the window, or 3 000 000 past it, bare
# or with payload and ACK, is dropped; the connection's first request is
# then answered as if nothing had happened. (Before: 0 of 20 answered.)
t_wire_blind_rst_new() {
  local s before after v i got
  s="$(src4)"
  before="$(SLT_CTL --json stats)"
  for v in "-100000" "3000000" "3000000 --payload --ack"; do
    for i in 1 2 3 4; do
      # shellcheck disable=SC2086  # the variant's flags split on purpose
      got="$(blind_rst "rst-new-${v%% *}-$i" --source "$s" --offset $v --requests 1 --path "/rst-new/$i")"
      check_eq "a new connection after a forged RST (offset $v), its first request" "$got" "200 answered"
    done
  done
  after="$(SLT_CTL --json stats)"
  note "appliance: rst_out_of_window $(delta_of "$before" "$after" rst_out_of_window), rst_challenged $(delta_of "$before" "$after" rst_challenged)"
  check_eq "forged RSTs dropped (out of the window)" "$(delta_of "$before" "$after" rst_out_of_window)" 12
  finish
}

# RFC 5961 on a connection already judged: its first request answered, one
# bare RST 3 000 000 bytes ahead, then up to 80 more requests on the same
# connection. Before, the RST closed the flow at the appliance (the origin
# ignored it) and every later request went through unjudged: 81 of 81
# served against tb-small's budget of 20. Now the RST is dropped (or
# challenged) and the budget holds: 20 served, then a 429 that closes.
t_wire_blind_rst_judged() {
  local s before after got
  s="$(src4)"
  before="$(SLT_CTL --json stats)"
  got="$(blind_rst rst-judged --source "$s" --offset 3000000 --first --requests 80 --path '/rst-judged/{i}')"
  after="$(SLT_CTL --json stats)"
  note "statuses: $got; appliance: rst_out_of_window $(delta_of "$before" "$after" rst_out_of_window), rst_challenged $(delta_of "$before" "$after" rst_challenged), requests $(delta_of "$before" "$after" requests)"
  check_eq "TB01: requests served on the connection after a forged RST (a budget of 20), then refused" \
    "$(sed 's/ [a-z-]*$//' <<<"$got" | tr ' ' '\n' | sort | uniq -c | awk '{ printf "%s×%s ", $1, $2 }')" "20×200 1×429 "
  check_eq "the forged RST: dropped or challenged, never taken" \
    "$(( $(delta_of "$before" "$after" rst_out_of_window) + $(delta_of "$before" "$after" rst_challenged) ))" 1
  check_eq "requests the appliance judged on the connection" "$(delta_of "$before" "$after" requests)" 21
  olog_settle
  check_olog "the connection's address" "$s" 20
  finish
}

# A segment with a wrong checksum is not the client's: a host drops it, so
# the appliance must too, before judging it. Here a forged GET of a decoy
# path, its TCP checksum (then, on a second connection, its IPv4 header
# checksum) wrong, at a connection's next sequence number; then the client's
# own GET of another path, as long, at the same number. The origin must
# serve the client's path. (Before, the appliance judged and recorded the
# decoy, the origin dropped it, and the client's segment was rewritten to
# the judged decoy with a fresh checksum: the origin served the decoy.)
t_wire_bad_checksum() {
  local s
  s="$(src4)"
  check_bad_checksums "$s"
  olog_settle
  check_olog "the connections' address" "$s" 2
  check_eq "paths the origin served" "$(olog_lines "$s" | awk '{ print $3 }' | sort | tr '\n' ' ')" \
    "/badsum/real-ip /badsum/real-tcp "
  finish
}

# check_bad_checksums SOURCE: forge.py badsum from SOURCE, once with a wrong
# TCP checksum and once with a wrong IPv4 header checksum (the client's path
# /badsum/real-KIND, the decoy's /badsum/lure-KIND). Each client GET must be
# answered, both forgeries dropped, and only the clients' two requests judged.
check_bad_checksums() {
  local s="$1" before after bad got
  before="$(SLT_CTL --json stats)"
  for bad in tcp ip; do
    ip netns exec "$NS_CLI" timeout -k 2 20 "$SLT_PY" "$SLT_HERE/forge.py" badsum --iface c0 --dst "$ORIGIN4" \
      --source "$s" --bad "$bad" --path "/badsum/real-$bad" --decoy "/badsum/lure-$bad" \
      >"$SLT_OUT/badsum-$bad.json" 2>"$SLT_OUT/badsum-$bad.stderr"
    got="$("$SLT_PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(" ".join(str(x) for x in d["statuses"]), d["end"])' \
      "$SLT_OUT/badsum-$bad.json" 2>/dev/null || echo "no result: $(tail -c 200 "$SLT_OUT/badsum-$bad.stderr")")"
    check_eq "the client's GET after a forged one with a wrong $bad checksum at the same number" "$got" "200 answered"
  done
  after="$(SLT_CTL --json stats)"
  check_eq "segments with a wrong checksum dropped" "$(delta_of "$before" "$after" dropped_bad_checksum)" 2
  check_eq "requests judged: the clients' two, not the decoys" "$(delta_of "$before" "$after" requests)" 2
}

# TB07's credential slots across a crash: one address uses 8 credentials
# (its 8 slots, each credential its own budget: RateLimit-Limit 300), then
# sluiced is killed (SIGKILL) and started again. The records live in a table
# file the new process re-attaches, so the slots are still held: a ninth
# credential from the address is counted against its bare budget (Limit 60),
# and the first credential still has its own. (Before, the records started
# empty after every restart and the ninth got a slot of its own.)
t_ctl_slots_crash_before() {
  local s i
  s="$(src4)"
  for ((i = 1; i <= 8; i++)); do
    client "c$i" --source "$s" --count 1 --path "/slots/c$i" -H "Authorization: Bearer slt-slot-$i"
    check_eq "TB07 credential $i of 8 before the crash: admitted on its own budget" \
      "$(res statuses "c$i") $(res expr "c$i" 'R[0]["headers"].get("ratelimit-limit") if R else None')" "200 300"
  done
  finish
}
t_ctl_slots_crash() {
  local s
  s="$(src4)"
  check_eq "sluiced said it re-attached the credential-slot records" \
    "$(grep -cE '^sluiced: re-attached [1-9][0-9]* credential-slot records from .*/credential-slots\.table' "$SLT_SLUICED_LOG")" 1
  client c9 --source "$s" --count 1 --path /slots/c9 -H 'Authorization: Bearer slt-slot-9'
  check_eq "TB07 a ninth credential after the crash, the 8 slots still held: counted against the bare budget" \
    "$(res statuses c9) $(res expr c9 'R[0]["headers"].get("ratelimit-limit") if R else None')" "200 60"
  client c1 --source "$s" --count 1 --path /slots/c1-again -H 'Authorization: Bearer slt-slot-1'
  check_eq "TB07 the first credential after the crash: still its own slot and budget" \
    "$(res statuses c1) $(res expr c1 'R[0]["headers"].get("ratelimit-limit") if R else None')" "200 300"
  finish
}

# Live runs survive a restart (the journal in --state-dir): before the
# restart one run is started with a budget, one started and ended, and a torn
# half record is appended to the journal (a daemon killed mid-write); after
# it the live run is listed with its budget and paced at it, the ended one is
# 404 (TB12), and the torn record was skipped with a warning.
t_ctl_runs_restart_before() {
  SLT_CTL run start itest-kept --budget 7 >/dev/null 2>&1 || fail "run start itest-kept"
  SLT_CTL run start itest-ended >/dev/null 2>&1 || fail "run start itest-ended"
  SLT_CTL run end itest-ended >/dev/null 2>&1 || fail "run end itest-ended"
  [ -s "$SLT_TMP/state/runs.journal" ] || fail "no journal at $SLT_TMP/state/runs.journal"
  printf 'S itest-torn 3 17' >>"$SLT_TMP/state/runs.journal"
  finish
}
t_ctl_runs_restart() {
  local s out
  s="$(src4)"
  out="$(SLT_CTL runs 2>&1)"
  check_eq "after the restart: the live run is listed with its budget" "$(awk '$1 == "itest-kept" { print $2 }' <<<"$out")" 7
  check_eq "after the restart: the ended run is not" "$(grep -c itest-ended <<<"$out")" 0
  check_eq "after the restart: the torn record is not" "$(grep -c itest-torn <<<"$out")" 0
  check_eq "the torn record was skipped with a warning" "$(grep -c 'runs.journal: line [0-9]*: torn record skipped' "$SLT_SLUICED_LOG")" 1
  client kept --source "$s" --count 8 --path '/vrx/itest-kept/v1/x{i}'
  check_eq "the kept run is paced at its budget" "$(res statuses kept)" "200x7 429"
  client ended --source "$s" --count 1 --path '/vrx/itest-ended/v1/x'
  check_eq "TB12 the ended run stays ended" "$(res statuses ended)" "404"
  SLT_CTL run end itest-kept >/dev/null 2>&1
  check_eq "run end after the restart" "$?" 0
  finish
}

# RF04, RF05, RF10 through sluicectl: hashes come from `credential hash`
# (TB05: the scheme's case and the spaces around do not matter); a file maps
# two credentials to alice, `credential add` gives bob one. Alice's two
# credentials share one blowhorn_health bucket (burst 30, 1/s): 25 on the
# first leave about 5 for the second; bob has his own 30. After `credential
# remove` the removed one is unknown (401). A broken file changes nothing.
t_ctl_credentials() {
  local s0 s1 h1 h1b h2 h3 out rc admitted path=/api/blowhorn/health
  s0="$(src4 0)" s1="$(src4 1)"
  h1="$(printf 'Bearer alice-one' | SLT_CTL credential hash)"
  check_eq "credential hash: 32 hex digits" "$(grep -cxE '[0-9a-f]{32}' <<<"$h1")" 1
  h1b="$(printf '  bearer alice-one \n' | SLT_CTL credential hash)"
  check_eq "TB05 the same credential respelled hashes the same" "$h1b" "$h1"
  h2="$(printf 'Bearer alice-two' | SLT_CTL credential hash)"
  h3="$(printf 'Bearer bob-one' | SLT_CTL credential hash)"
  printf '# test users\n%s alice\n%s alice\n' "$h1" "$h2" >"$SLT_TMP/creds.txt"
  out="$(SLT_CTL credentials load "$SLT_TMP/creds.txt" 2>&1)"
  check_eq "credentials load: exit" "$?" 0
  SLT_CTL credential add "$h3" bob >/dev/null 2>&1
  check_eq "credential add: exit" "$?" 0
  out="$(SLT_CTL credentials show 2>&1)"
  check_eq "credentials show: alice has 2" "$(awk '$1 == "alice" { print $2 }' <<<"$out")" 2
  check_eq "credentials show: bob has 1" "$(awk '$1 == "bob" { print $2 }' <<<"$out")" 1
  grep -q "alice-one" "$SLT_TMP/state/credentials" && fail "the state directory holds a raw credential"
  check_eq "the map is kept in the state directory" "$(grep -c "$h1 alice" "$SLT_TMP/state/credentials")" 1
  client one --source "$s0" --count 25 --path "$path" -H 'Authorization: Bearer alice-one'
  check_eq "alice's first credential: 25 admitted" "$(res statuses one)" "200x25"
  client two --source "$s1" --count 12 --path "$path" -H 'Authorization: Bearer alice-two'
  admitted="$(res count two 200)"
  check_range "RF04 alice's second credential shares her bucket: ~5 left (+1/s refill)" "$admitted" 5 9
  check_eq "RF04 ... then refused, the rest on the same connection" "$(res count two 429)" "$((12 - admitted))"
  client bob --source "$s0" --count 12 --path "$path" -H 'Authorization: Bearer bob-one'
  check_eq "bob's own bucket" "$(res statuses bob)" "200x12"
  out="$(SLT_CTL --json bucket show blowhorn_health alice)"
  check_range "bucket show: alice's bucket nearly empty" \
    "$("$SLT_PY" -c 'import json,sys; print(json.loads(sys.argv[1])["remaining"])' "$out")" 0 4
  SLT_CTL credential remove "$h2" >/dev/null 2>&1
  check_eq "credential remove: exit" "$?" 0
  client gone --source "$s1" --count 1 --path "$path" -H 'Authorization: Bearer alice-two'
  check_eq "RF10 a removed credential is unknown: 401" "$(res statuses gone)" "401"
  printf '%s alice\nnot-a-hash bob\n' "$h2" >"$SLT_TMP/creds-bad.txt"
  out="$(SLT_CTL credentials load "$SLT_TMP/creds-bad.txt" 2>&1)"
  rc=$?
  check_eq "a broken credentials file: refused (exit 1)" "$rc" 1
  check_eq "a broken credentials file: file:line:column" "$(grep -c 'creds-bad.txt:2:1: ' <<<"$out")" 1
  out="$(SLT_CTL credentials show 2>&1)"
  check_eq "a broken file changed nothing" "$(awk '$1 == "alice" || $1 == "bob" { printf "%s=%s ", $1, $2 }' <<<"$out")" "alice=1 bob=1 "
  SLT_CTL credential remove 0123456789abcdef0123456789abcdef >/dev/null 2>&1
  check_eq "removing an unknown hash: exit 1" "$?" 1
  check_olog "origin log: the admitted requests only" "$s0" $((25 + 12))
  finish
}

# DQ05, DQ07 through sluicectl: a deployment's usage report is charged to
# its current minute's TPM (default quota 100000 tokens); under it the next
# request passes, once the total has reached it the next request is refused
# with the gateway's body and Retry-After = seconds to the next full minute;
# another deployment is untouched (DQ06).
t_ctl_usage_report() {
  local s sec out lo hi dep=itest-usage-dep
  s="$(src4)"
  sec="$(date -u +%-S)"
  if [ "$sec" -ge 48 ]; then
    note "waiting $((61 - sec)) s for the next minute"
    sleep $((61 - sec))
  fi
  client a --source "$s" --count 1 --path /dq/u1 -H "X-Pi-Deployment: $dep"
  check_eq "before any report: admitted" "$(res statuses a)" "200"
  out="$(SLT_CTL usage report "$dep" 60000 2>&1)"
  check_eq "usage report: exit" "$?" 0
  check_eq "usage report: the minute's total" "$(grep -c '60000 of 100000 this minute' <<<"$out")" 1
  client b --source "$s" --count 1 --path /dq/u2 -H "X-Pi-Deployment: $dep"
  check_eq "DQ05 under the quota: admitted" "$(res statuses b)" "200"
  out="$(SLT_CTL usage report "$dep" 50000 2>&1)"
  check_eq "DQ05 one large report may pass the quota" "$(grep -c '110000 of 100000 this minute, over' <<<"$out")" 1
  lo=$((60 - $(date -u +%-S)))
  client c --source "$s" --count 1 --path /dq/u3 -H "X-Pi-Deployment: $dep"
  hi=$((60 - $(date -u +%-S)))
  check_eq "DQ05 over the quota: refused" "$(res statuses c)" "429"
  check_eq "DQ07 body" "$(res body c 1)" "$SLT_DQ07_BODY"
  check_range "DQ07 Retry-After: to the next full minute" "$(res header c 1 Retry-After)" "$((hi < 1 ? 1 : hi))" "$((lo + 1))"
  client d --source "$s" --count 1 --path /dq/u4 -H 'X-Pi-Deployment: itest-other-dep'
  check_eq "DQ06 another deployment: admitted" "$(res statuses d)" "200"
  out="$(SLT_CTL --json bucket show deployment "$dep")"
  check_eq "bucket show: tokens and requests this minute" \
    "$("$SLT_PY" -c 'import json,sys; d=json.loads(sys.argv[1]); print(d["tokens"], d["requests"], d["refusing"])' "$out")" "110000 3 True"
  SLT_CTL usage report "$dep" lots >/dev/null 2>&1
  check_eq "usage report of a non-number: exit 2" "$?" 2
  check_olog "origin log: the 3 admitted" "$s" 3
  finish
}

# ================================================================ logs

# The sampled refusal log at 4 records a second (--refusal-log 4).
# An address spends its bare budget (20 an hour) and
# is refused over fresh connections, twice, 0.6 s apart: the log shows
# `refusal` lines naming the rule, the status and the address, at least one
# per run and no more than one per 250 ms of the whole (the worker keeps
# the first offer, then one per interval). A credential's refusals name its
# keyed digest, never the credential.
t_logs_refusal_sample() {
  local s t0 t1 mark ms lines most all refused
  s="$(src4)"
  mark="$(wc -l <"$SLT_SLUICED_LOG")"
  t0="$(date +%s%N)"
  client first --source "$s" --connections 60 --count 1 --path '/rl/a{c}'
  sleep 0.6
  client second --source "$s" --connections 20 --count 1 --path '/rl/b{c}'
  t1="$(date +%s%N)"
  sleep 0.5  # the main loop drains the workers' rings every 100 ms
  refused="$(res expr first 'sum(1 for r in R if r["status"] == 429)') $(res expr second 'sum(1 for r in R if r["status"] == 429)')"
  check_eq "20 admitted, then every request refused" "$refused" "40 20"
  ms=$(((t1 - t0) / 1000000))
  most=$((ms / 250 + 1))
  lines="$(tail -n +"$((mark + 1))" "$SLT_SLUICED_LOG" | grep -cxF "sluiced: refusal: rule=bare status=429 key=$s")"
  all="$(tail -n +"$((mark + 1))" "$SLT_SLUICED_LOG" | grep -c "^sluiced: refusal: .*key=$s\$")"
  note "$lines refusal lines for 60 refusals over $ms ms (at most $most allowed)"
  check_range "sampled refusal lines: one per run at least, at most 4 a second" "$lines" 2 "$most"
  check_eq "every refusal line of the address names the rule and the status" "$all" "$lines"
  check_eq "no sampled refusal dropped" "$(tail -n +"$((mark + 1))" "$SLT_SLUICED_LOG" | grep -c 'sampled refusals dropped')" 0
  # A credential: 4 an hour, then refused; the log names its digest.
  sleep 0.3
  mark="$(wc -l <"$SLT_SLUICED_LOG")"
  t0="$(date +%s%N)"
  client cred --source "$s" --connections 8 --count 1 --path '/rl/c{c}' -H 'Authorization: Bearer sk-slt-refusal-log-4242'
  t1="$(date +%s%N)"
  sleep 0.5
  check_eq "credential: 4 admitted, then refused" "$(res expr cred 'sum(1 for r in R if r["status"] == 429)')" 4
  check_range "credential: sampled refusal lines" \
    "$(tail -n +"$((mark + 1))" "$SLT_SLUICED_LOG" | grep -cE '^sluiced: refusal: rule=credentialed status=429 key=credential [0-9a-f]{32}$')" \
    1 "$(((t1 - t0) / 250000000 + 1))"
  check_eq "the credential itself is never logged" "$(grep -c 'sk-slt-refusal-log' "$SLT_SLUICED_LOG")" 0
  check_olog "origin log: 20 bare and 4 credentialed admitted" "$s" 24
  finish
}

# ================================================================ replay

# capture_start NAME FILTER: tcpdump on the client's side of the lab (c0, in
# the client namespace) writing $SLT_OUT/NAME.pcap, bounded to 120 s; its
# PID in SLT_CAPTURE_PID once it listens. --immediate-mode: each packet is
# handed over as it comes (the default waits up to a second to fill a
# block, and a stop would lose what is waiting). capture_stop: SIGINT to that PID
# (and only it), then wait for the file to be complete.
capture_start() {
  command -v tcpdump >/dev/null || { fail "tcpdump is missing (scripts/install-deps.sh test installs it)"; return 1; }
  ip netns exec "$NS_CLI" timeout -s INT -k 5 120 tcpdump -i c0 --immediate-mode -U -s 0 -w "$SLT_OUT/$1.pcap" "$2" \
    >"$SLT_OUT/$1.tcpdump.log" 2>&1 &
  SLT_CAPTURE_PID=$!
  local i
  for ((i = 0; i < 50; i++)); do
    grep -q 'listening on' "$SLT_OUT/$1.tcpdump.log" && return 0
    sleep 0.1
  done
  fail "tcpdump did not start: $(tail -c 300 "$SLT_OUT/$1.tcpdump.log")"
  return 1
}
capture_stop() {
  sleep 0.5  # the last segments (FINs, acknowledgements) onto the wire
  kill -INT "$SLT_CAPTURE_PID" 2>/dev/null
  wait "$SLT_CAPTURE_PID" 2>/dev/null
  note "capture: $(tail -n 3 "$SLT_OUT/$1.tcpdump.log" | tr '\n' ' ')"
}

# replay_matches_live NAME POLICY BEFORE AFTER: sluice-replay on
# $SLT_OUT/NAME.pcap under POLICY; its decisions per rule equal the live
# deltas between the two `sluicectl --json stats`; its HTML report, in
# headless Chromium with no network, shows the JSON's numbers (screenshot
# kept in $SLT_OUT).
replay_matches_live() {
  local name="$1" policy="$2" replay rc out
  # sluice-replay's label secret (credential digests) in the test's own
  # directory, not in the home directory.
  local XDG_STATE_HOME="$SLT_OUT/xdg"
  export XDG_STATE_HOME
  replay="$(dirname "$SLUICED")/sluice-replay"
  [ -x "$replay" ] || { fail "sluice-replay not built next to sluiced ($replay)"; return; }
  printf '%s\n' "$3" >"$SLT_OUT/$name.before.json"
  printf '%s\n' "$4" >"$SLT_OUT/$name.after.json"
  timeout 120 "$replay" --policy "$policy" --json --html "$SLT_OUT/$name.html" "$SLT_OUT/$name.pcap" \
    >"$SLT_OUT/$name.replay.json" 2>"$SLT_OUT/$name.replay.stderr"
  rc=$?
  check_eq "sluice-replay exit" "$rc" 0
  # Warnings say what the replay lacked (live runs, a credential map): the
  # live box had none either here. Any other line is a problem of the capture.
  check_eq "no problems in the capture" "$(grep -v '^sluice-replay: warning: ' "$SLT_OUT/$name.replay.stderr")" ""
  timeout 120 "$replay" --policy "$policy" "$SLT_OUT/$name.pcap" >"$SLT_OUT/$name.summary.txt" 2>&1
  out="$("$SLT_PY" "$SLT_HERE/replay_counts.py" "$SLT_OUT/$name.before.json" "$SLT_OUT/$name.after.json" \
    "$SLT_OUT/$name.replay.json" 2>&1)"
  printf '%s\n' "$out" >"$SLT_OUT/$name.compare.txt"
  check_eq "replayed decisions equal the live ones ($SLT_OUT/$name.compare.txt)" "$(tail -n 1 <<<"$out" | cut -d: -f1)" EQUAL
  [ -n "${SLT_REPLAY_NO_HTML:-}" ] && return
  out="$(timeout 180 "$SLT_PY" "$SLT_HERE/replay_html_check.py" "$SLT_OUT/$name.html" "$SLT_OUT/$name.replay.json" \
    "$SLT_OUT" 2>&1)"
  note "$(tail -n 1 <<<"$out")"
  check_eq "the HTML report in Chromium shows the JSON's numbers" "$(tail -n 1 <<<"$out" | cut -d' ' -f1)" PASS
}

# A capture of this test's traffic, taken with tcpdump on the
# client's side while it crossed sluiced and replayed with sluice-replay
# under the same policy, gives the live appliance's decisions: per rule, the
# same admitted, refused and answered counts. The traffic: TB01's bare
# budget spent over keep-alive and pipelined connections and over IPv6, then
# refused; TB18's exempt /healthz; TB12's 404 for runs that are not live
# (charged to the bare budget, so refused once it is spent); a credential's
# own budget (TB05); a head the parser refuses (400). Budgets refill per hour
# (tb-hourly: a bare token a minute), so no decision falls near a refill.
t_replay_capture() {
  local a b v6 before after
  a="$(src4 0)" b="$(src4 1)" v6="$(src6 0)"
  capture_start replay-capture "tcp port 80 and (host $a or host $b or host $v6)" || finish
  before="$(SLT_CTL --json stats)"
  client ra --source "$a" --plan '[{"count": 30, "path": "/rc/a{i}"}, {"count": 20, "mode": "pipeline", "path": "/rc/p{i}"},
    {"count": 3, "path": "/healthz"}, {"count": 14, "path": "/rc/b{i}"}, {"count": 2, "path": "/vrx/rc-gone/v1/x"}]'
  client rb --source "$b" --plan '[{"count": 6, "path": "/rc/c{i}", "headers": ["Authorization: Bearer rc-cred-1"]},
    {"count": 2, "path": "/vrx/rc-gone/v1/y"}]'
  client r6 --host "$ORIGIN6" --source "$v6" --count 62 --path '/rc/v6/{i}'
  ccurl rbad --interface "$b" -H 'Bad Field: x' "http://$ORIGIN4/rc/bad" >"$SLT_OUT/rbad.status"
  after="$(SLT_CTL --json stats)"
  capture_stop replay-capture
  check_eq "TB01 the bare budget over keep-alive and pipelined connections (TB12 runs past it refused too)" "$(res count ra 429)" 6
  check_eq "TB12 runs not live: 404 while the budget lasts" "$(res count rb 404)" 2
  check_eq "TB01 over IPv6" "$(res statuses r6)" "200x60 429x2"
  check_eq "a head the parser refuses: 400" "$(cat "$SLT_OUT/rbad.status")" 400
  replay_matches_live replay-capture "$(policy_file tb-hourly)" "$before" "$after"
  check_re "the replay says it was given no live runs, with the 404s that touched" \
    "$(cat "$SLT_OUT/replay-capture.replay.stderr")" \
    ': 2 requests answered 404 because no live runs were given \(--state-dir or --runs\)'
  finish
}

# The origin's own access log, written by nginx in the lab's
# format ($remote_addr $request_method $request_uri ... $msec ...), replayed
# under a stricter copy of the profile (a bare burst of 25 an hour) against
# counts worked out by hand: of this client's 40 admitted requests, 25 would
# have been admitted and 15 refused (TB01), the first refusal at the 26th
# line's time; /healthz stays exempt (TB18). A line that does not match the
# format is named by FILE:LINE:COLUMN and skipped; --strict makes that exit 6.
t_replay_nginx_log() {
  local a replay log fmt rc
  local XDG_STATE_HOME="$SLT_OUT/xdg"  # the label secret, if a rule keys on credentials
  export XDG_STATE_HOME
  a="$(src4 0)"
  replay="$(dirname "$SLUICED")/sluice-replay"
  [ -x "$replay" ] || { fail "sluice-replay not built next to sluiced ($replay)"; finish; }
  client nl --source "$a" --plan '[{"count": 40, "path": "/nl/{i}"}, {"count": 2, "path": "/healthz"}]'
  check_eq "through the appliance: all admitted" "$(res statuses nl)" "200x40 | 200x2"
  olog_settle
  log="$SLT_OUT/access.log"
  awk -v a="$a" '$1 == a' "$(SLT_ACCESS_LOG)" >"$log"
  check_eq "nginx logged every request" "$(wc -l <"$log")" 42
  printf '%s GET\n' "$a" >>"$log"  # cut short: line 43
  slt_policy_copy three-budgets nl-strict three-budgets-nl-strict \
    '  bare:       { rate: 60/min, burst: 60 }\n' '  bare:       { rate: 25/hour, burst: 25 }\n' || { fail "policy copy"; finish; }
  fmt="$(sed -n "s/^  log_format slt '\\(.*\\)';\$/\\1/p" "$SLT_TMP/nginx/nginx.conf" | sed 's/\\\$/$/g')"
  [ -n "$fmt" ] || fmt='$remote_addr $request_method $request_uri $status $connection:$connection_requests $request_id $http_x_slt_test $http_x_pi_deployment $msec $body_bytes_sent'
  timeout 60 "$replay" --policy "$SLT_TMP/policies/nl-strict.yaml" --log-format "$fmt" --json "$log" \
    >"$SLT_OUT/nl.replay.json" 2>"$SLT_OUT/nl.replay.stderr"
  rc=$?
  check_eq "exit (a broken line is skipped)" "$rc" 0
  check_eq "the broken line named" "$(grep -c "^$log:43:[0-9]*: " "$SLT_OUT/nl.replay.stderr")" 1
  local want_first got
  want_first="$("$SLT_PY" -c 'import sys, datetime
msec = sys.stdin.read().splitlines()[25].split()[8]
s, ms = msec.split(".")
print(datetime.datetime.fromtimestamp(int(s), datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S") + "." + ms + "Z")' <"$log")"
  got="$("$SLT_PY" -c 'import json, sys
r = json.load(open(sys.argv[1])); p = r["policy"]; k = p["refused_keys"]
print(r["records"], r["inputs"][0]["problems"], p["admitted"], p["refused"], p["exempt"],
      k[0]["key"] if k else "-", k[0]["refused"] if k else 0, k[0]["first_refusal"] if k else "-")' "$SLT_OUT/nl.replay.json" 2>&1)"
  check_eq "TB01 25 of 40 admitted, 15 refused from the 26th line; TB18 2 exempt" "$got" "42 1 25 15 2 $a 15 $want_first"
  timeout 60 "$replay" --policy "$SLT_TMP/policies/nl-strict.yaml" --log-format "$fmt" --strict -q "$log" \
    >"$SLT_OUT/nl.strict.txt" 2>&1
  check_eq "--strict: exit 6 for the skipped line" "$?" 6
  finish
}

# DQ05: usage the origin reports in its responses is found in the
# capture's origin-to-client half and charged when each response ended, so
# the replay refuses the request after the minute's tokens ran out, as the
# appliance did (DQ07). Waits for a minute's first 50 s, as
# dq-usage-from-response does.
t_replay_capture_usage() {
  local s sec before after dep='X-Pi-Deployment: itest-replay-usage'
  s="$(src4)"
  sec="$(date -u +%-S)"
  if [ "$sec" -ge 50 ]; then
    note "waiting $((61 - sec)) s for the next minute"
    sleep $((61 - sec))
  fi
  capture_start replay-usage "tcp port 80 and host $s" || finish
  before="$(SLT_CTL --json stats)"
  client u --source "$s" -H "$dep" --plan '[{"count": 1, "path": "/usage/a?tokens=60000"},
    {"count": 1, "path": "/usage-trailer/b?tokens=50000"}, {"count": 2, "path": "/usage/c?tokens=1"}]'
  after="$(SLT_CTL --json stats)"
  capture_stop replay-usage
  check_eq "DQ05 under the quota, then over it" "$(res statuses u)" "200 | 200 | 429x2"
  SLT_REPLAY_NO_HTML=1 replay_matches_live replay-usage "$(policy_file deployment-quotas)" "$before" "$after"
  check_eq "the replay charged both responses' tokens (DQ05)" \
    "$("$SLT_PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["policy"]["usage_reports"])' "$SLT_OUT/replay-usage.replay.json" 2>&1)" 2
  finish
}

# ================================================================ paths

# Ambiguous request paths (docs/paths.md): some 600 spellings under /healthz
# (exempt), /v1/ (a bucket of its own) and elsewhere (the catch-all), made of
# prefixes, separators ('\', %5C, %2F, '//'), dot segments (raw, %2E,
# overlong, "..;") and encodings, each sent raw to nginx (port 80) and to
# Python's http.server (port 8088, path_origin.py: the stdlib's own
# translate_path) through the appliance. Each answer is either the
# appliance's own 400 or a judgement (exempt, v1, the catch-all: from
# RateLimit-Policy) equal to the location the origin served (X-Loc); nothing
# judged exempt reaches anything but /healthz. (When the normaliser read '\'
# and %5C as '/', /v1/b1%5c..%5c..%5chealthz was exempt and nginx served it
# from /v1/.)
t_wire_path_corpus() {
  local s pid i rc sum
  s="$(src4)"
  mkdir -p "$SLT_OUT/py-root"
  ip netns exec "$NS_ORG" "$SLT_PY" "$SLT_HERE/path_origin.py" --bind "$ORIGIN4" --port 8088 \
    --root "$SLT_OUT/py-root" >"$SLT_OUT/py-origin.log" 2>&1 </dev/null &
  pid=$!
  slt_track_pid "$pid"
  trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -f "$SLT_TMP/pids/$pid"' EXIT
  for ((i = 0; i < 50; i++)); do
    in_org curl --noproxy '*' -sf -o /dev/null --max-time 1 "http://$ORIGIN4:8088/" && break
    sleep 0.1
  done
  [ "$i" -lt 50 ] || { fail "the Python origin did not answer on :8088: $(tail -c 300 "$SLT_OUT/py-origin.log")"; finish; }
  ip netns exec "$NS_CLI" timeout -k 2 120 "$SLT_PY" "$SLT_HERE/path_corpus.py" --host "$ORIGIN4" --source "$s" \
    --port 80 --port 8088 --out "$SLT_OUT/path-corpus.jsonl" >"$SLT_OUT/path-corpus.summary" 2>"$SLT_OUT/path-corpus.stderr"
  rc=$?
  sum="$SLT_OUT/path-corpus.summary"
  [ -s "$sum" ] || { fail "path_corpus.py wrote no summary (status $rc): $(tail -c 300 "$SLT_OUT/path-corpus.stderr")"; finish; }
  # Counts per origin, for the notes; every spelling that disagreed, leaked
  # an exemption or got no answer, as a failure.
  "$SLT_PY" - "$sum" "$SLT_OUT/path-corpus.jsonl" >"$SLT_OUT/path-corpus.report" <<'EOF_PY'
import collections, json, sys
summary = json.loads(open(sys.argv[1]).read().splitlines()[-1])
recs = [json.loads(l) for l in open(sys.argv[2])]
print("note %d spellings in %s s" % (summary["spellings"], summary["elapsed"]))
for port in sorted({r["port"] for r in recs}):
    c = collections.Counter(r["outcome"] for r in recs if r["port"] == port)
    print("note port %d: refused %d, agreed %d, origin-refused %d, disagreed %d, exempt-leak %d, error %d" % (
        port, c["refused"], c["agreed"], c["origin-refused"], c["disagreed"], c["exempt-leak"], c["error"]))
    served = collections.Counter(r["served"] for r in recs if r["port"] == port and r["outcome"] == "agreed")
    for loc in ("healthz", "v1", "root"):
        if served[loc] == 0:
            print("fail port %d: no spelling was agreed on as %s (the corpus tests nothing there)" % (port, loc))
for r in recs:
    if r["outcome"] in ("disagreed", "exempt-leak", "error"):
        print("fail port %d %s: %s (judged %s, served %s, status %s%s)" % (
            r["port"], json.dumps(r["path"]), r["outcome"], r["judged"], r["served"], r["status"],
            ", " + r["error"] if r["error"] else ""))
attacks = ["/v1/b1%5c..%5c..%5chealthz", "/v1/b1%5C..%5C..%5Chealthz", "/v1/b1\\..\\..\\healthz",
           "/v1/b1/..%5c..%5chealthz", "/v1/%2e%2e%5chealthz"]
for a in attacks:
    for r in recs:
        if r["path"] == a and r["outcome"] != "refused":
            print("fail port %d %s: the attack spelling was %s, not refused" % (r["port"], json.dumps(a), r["outcome"]))
EOF_PY
  while read -r kind rest; do
    case "$kind" in
      note) note "$rest" ;;
      fail) fail "$rest" ;;
    esac
  done < <(head -n 60 "$SLT_OUT/path-corpus.report")
  [ "$(grep -c '^fail' "$SLT_OUT/path-corpus.report")" -le 60 ] ||
    fail "(and more: path-corpus.report in the test's output directory)"
  finish
}

# ================================================================ driver

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  case "${1:-}" in
    list) grep -vE '^\s*$' <<<"$SLT_REGISTRY" ;;
    run)
      name="$2"
      fn="t_${name//-/_}${3:+_$3}"
      . "$(dirname "$0")/topology.sh"
      . "$SLT_HERE/lib.sh"
      declare -F "$fn" >/dev/null || { echo "no test named $name" >"$SLT_WHY"; exit 1; }
      set -o pipefail
      "$fn"
      finish
      ;;
    *) echo "usage: $0 list | run NAME (run.sh runs them)" >&2; exit 2 ;;
  esac
fi
