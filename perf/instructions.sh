#!/usr/bin/env bash
# Instructions per unit of work inside the worker's poll loop
# (sluice::dataplane::Worker::poll_once, inclusive), for packet_rate's
# scenarios, counted by callgrind: two run sizes, the difference divided by
# the units between them, so start-up, handshakes and warm-up cancel out.
# Instruction counts do not swing with the machine as the wall clock does,
# so they are what the data plane's cost is budgeted in; ratios against a
# peer (perf/parser_vs_pico, perf/e2e_compare.sh) confirm them.
#
#   perf/instructions.sh [--check | --update] [BUILD_DIR]
#
#   (none)    print each scenario's count beside the one recorded in
#             perf/instructions.expected
#   --check   the same, and exit 1 if a scenario is more than 5% over its
#             recorded count (a guard in scripts/test.sh)
#   --update  record the counts in perf/instructions.expected: for a
#             change meant to cost more, or one that made it cheaper
#
# BUILD_DIR (default build) must hold a release build with perf/packet_rate.
# Needs valgrind. About 30 s on a 2-core VM.
set -euo pipefail

mode=print
case "${1:-}" in
  --check) mode=check; shift ;;
  --update) mode=update; shift ;;
  -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  -*) echo "instructions.sh: unknown option '$1' (--check, --update or none)" >&2; exit 2 ;;
esac
build="${1:-build}"
[ $# -le 1 ] || { echo "instructions.sh: unexpected '$2' (options come before BUILD_DIR)" >&2; exit 2; }
here="$(cd "$(dirname "$0")" && pwd)"
expected="$here/instructions.expected"
bin="$build/perf/packet_rate"
[ -x "$bin" ] || { echo "instructions.sh: $bin not found (build with -Dperf=true)" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "instructions.sh: valgrind not installed" >&2; exit 2; }

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# The head scan and the checksum pick their instruction set at run time, and
# valgrind offers at most AVX2: the counts hold for the set picked under it,
# recorded beside them. A machine that picks another is told so and not held
# to them.
isa_under_valgrind() {
  local flags
  flags="$(grep -m1 '^flags' /proc/cpuinfo)"
  if [[ " $flags " == *" avx2 "* && " $flags " == *" bmi2 "* ]]; then echo avx2
  elif [[ " $flags " == *" sse4_2 "* && " $flags " == *" ssse3 "* ]]; then echo sse42
  else echo scalar; fi
}
isa="$(isa_under_valgrind)"
recorded_isa="$(awk '$1 == "isa" {print $2}' "$expected" 2>/dev/null || true)"

# The scenarios, their two sizes (--frames) and what one unit is. The
# sizes are the smallest at which the count no longer moves (checked at
# twice and four times these: within 0.2%).
scenarios=(
  "admitted 5000 10000 per admitted request (87-byte GET, 149-byte response)"
  "refused 5000 10000 per refused request (SYN-proxy handshake, 429 and FIN, RST to the origin)"
  "bridged 20000 40000 per bridged frame (UDP, ICMP, TCP to another port)"
)

# Instructions inside poll_once for one run of `frames`.
count() {
  local scenario="$1" frames="$2" out="$tmp/$1.$2.out"
  if ! valgrind --tool=callgrind --toggle-collect='sluice::dataplane::Worker::poll_once()' \
      --callgrind-out-file="$out" "$bin" --scenario "$scenario" --frames "$frames" --repetitions 1 \
      --flows 1024 >"$tmp/$1.$2.log" 2>&1; then
    echo "instructions.sh: packet_rate --scenario $scenario --frames $frames failed:" >&2
    tail -n 20 "$tmp/$1.$2.log" >&2
    exit 1
  fi
  awk '/^totals:/ {print $2}' "$out"
}

recorded() {
  [ "$isa" = "$recorded_isa" ] || return 0
  awk -v s="$1" '$1 == s {print $2}' "$expected" 2>/dev/null || true
}
if [ -n "$recorded_isa" ] && [ "$isa" != "$recorded_isa" ]; then
  echo "instructions.sh: the figures in $expected were counted with the $recorded_isa kernels;" \
    "this machine runs $isa ones under valgrind: counted, not compared"
fi

over=0
lines=()
printf '%-9s %12s %9s %7s  %s\n' scenario instructions recorded change unit
for entry in "${scenarios[@]}"; do
  read -r name small large unit <<<"$entry"
  a="$(count "$name" "$small")"
  b="$(count "$name" "$large")"
  per=$(( (b - a) / (large - small) ))
  lines+=("$name $per")
  was="$(recorded "$name")"
  change="-"
  if [ -n "$was" ] && [ "$was" -gt 0 ]; then
    change="$(awk -v n="$per" -v w="$was" 'BEGIN {printf "%+.1f%%", 100 * (n - w) / w}')"
    if [ "$mode" = check ] && [ $(( per * 100 )) -gt $(( was * 105 )) ]; then over=1; fi
  fi
  printf '%-9s %12d %9s %7s  %s\n' "$name" "$per" "${was:--}" "$change" "$unit"
done

case "$mode" in
  update)
    {
      echo "# Instructions per unit inside Worker::poll_once, recorded by perf/instructions.sh --update"
      echo "# ($(date -u +%Y-%m-%d), $(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo '?'))."
      echo "# scripts/test.sh fails when a scenario grows more than 5% past its figure here."
      echo "isa $isa"
      printf '%s\n' "${lines[@]}"
    } >"$expected"
    echo "recorded in $expected"
    ;;
  check)
    if [ "$over" -ne 0 ]; then
      echo "instructions.sh: a scenario costs more than 5% over perf/instructions.expected; find why" \
        "(callgrind_annotate on a run), or record the new figure with --update if it is meant" >&2
      exit 1
    fi
    ;;
esac
