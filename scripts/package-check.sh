#!/usr/bin/env bash
# The Debian package, built, installed, used and purged, as
# .ci/run's test command runs it:
#   1. dpkg-buildpackage -us -uc -b on a copy of the tree (its tracked and
#      unignored files: what a clean clone has, plus work not committed yet);
#   2. lintian on the .deb: no errors;
#   3. dpkg -i, then from the installed files only: the layout (programs,
#      man pages that render, examples in /etc/sluice, the unit, the
#      completion, the sluice group, /var/lib/sluice 0700), `sluiced
#      --check-config /etc/sluice/default.yaml`, `systemd-analyze verify` of
#      an instance of the installed unit, and a short appliance run on the
#      integration lab's namespaces (/usr/sbin/sluiced between curl and
#      nginx, /usr/bin/sluicectl status, a clean stop); the installed
#      sluice-replay on a small log;
#   4. dpkg --purge: every file the package installed is gone, and so are
#      /etc/sluice and /var/lib/sluice; the sluice group stays (Debian policy
#      keeps system groups).
# Refuses to run where a sluice package is installed already (it would
# remove it). Needs root. Everything it set up is torn down, also on failure.
#   scripts/package-check.sh [WORK_DIR]        all of it (default: a temporary directory)
#   scripts/package-check.sh build WORK_DIR    1 and 2 only: the .deb and lintian's log left in WORK_DIR
#   scripts/package-check.sh check WORK_DIR    3 and 4, on the .deb `build` left there
# The test command runs `build` in the background while the fuzzers run,
# then `check`.
set -uo pipefail
cd "$(dirname "$0")/.."
REPO="$PWD"
export LC_ALL=C PATH="/usr/sbin:/sbin:$PATH"
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY no_proxy NO_PROXY

die() { echo "package-check: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || { echo "package-check: needs root (dpkg -i, namespaces)" >&2; exit 2; }
for tool in dpkg-buildpackage lintian systemd-analyze man nginx curl; do
  command -v "$tool" >/dev/null || { echo "package-check: $tool missing (scripts/install-deps.sh test)" >&2; exit 2; }
done
if dpkg-query -W -f='${Status}' sluice 2>/dev/null | grep -q 'installed'; then
  echo "package-check: a sluice package is installed on this machine; not touching it" >&2
  exit 2
fi

phase=all
case "${1:-}" in
  build|check)
    phase="$1"
    [ -n "${2:-}" ] || { echo "package-check: $1 needs a WORK_DIR" >&2; exit 2; }
    shift ;;
esac
keep_work="${1:+1}"   # a directory given is kept (its logs); a temporary one is removed
work="${1:-$(mktemp -d /tmp/sluice-package.XXXXXX)}"
installed=0
failures=0
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1"; failures=$((failures + 1)); }

cleanup() {
  [ "$(type -t topology_down)" = function ] && topology_down >/dev/null 2>&1
  if [ "$installed" = 1 ]; then dpkg --purge sluice >/dev/null 2>&1; fi
  [ -z "$keep_work" ] && rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---------------------------------------------------------------- build
if [ "$phase" != check ]; then
echo "== building the package in $work"
mkdir -p "$work/src"
git ls-files -z --cached --others --exclude-standard |
  while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
  tar -c --null -T - | tar -x -C "$work/src" || die "could not copy the tree"
started=$SECONDS
if ! (cd "$work/src" && dpkg-buildpackage -us -uc -b >"$work/build.log" 2>&1); then
  tail -n 40 "$work/build.log"
  die "dpkg-buildpackage failed (log above)"
fi
deb="$(ls "$work"/sluice_*_amd64.deb 2>/dev/null | head -n 1)"
[ -n "$deb" ] || die "no .deb was built"
pass "dpkg-buildpackage -us -uc -b ($((SECONDS - started)) s): $(basename "$deb")"

if lintian --fail-on error --tag-display-limit 0 "$deb" >"$work/lintian.log" 2>&1; then
  pass "lintian: no errors ($(grep -c '^W:' "$work/lintian.log") warnings)"
  sed 's/^/  | /' "$work/lintian.log"
else
  sed 's/^/  | /' "$work/lintian.log"
  fail "lintian reports errors"
fi
if [ "$phase" = build ]; then
  [ "$failures" -eq 0 ] || { echo "package-check: $failures failed"; exit 1; }
  exit 0
fi
else
  deb="$(ls "$work"/sluice_*_amd64.deb 2>/dev/null | head -n 1)"
  [ -n "$deb" ] || die "no .deb in $work (scripts/package-check.sh build $work first)"
  echo "== checking $(basename "$deb"), built in $work"
fi

# ---------------------------------------------------------------- install
dpkg -i "$deb" >"$work/install.log" 2>&1 || { cat "$work/install.log"; die "dpkg -i failed"; }
installed=1
dpkg -L sluice | sort >"$work/files"
missing=0
for f in /usr/sbin/sluiced /usr/bin/sluicectl /usr/bin/sluice-replay /etc/sluice/default.yaml /etc/sluice/three-budgets.yaml \
  /etc/sluice/route-families.yaml /etc/sluice/deployment-quotas.yaml /etc/sluice/sluice.env.example \
  /lib/systemd/system/sluiced@.service /usr/lib/sysusers.d/sluice.conf /usr/lib/tmpfiles.d/sluice.conf \
  /usr/share/bash-completion/completions/sluicectl /usr/share/man/man8/sluiced.8.gz \
  /usr/share/man/man8/sluicectl.8.gz /usr/share/man/man5/sluice-policy.5.gz \
  /usr/share/man/man1/sluice-replay.1.gz; do
  [ -e "$f" ] || { echo "  missing: $f"; missing=1; }
done
[ "$missing" = 0 ] && pass "installed layout (programs, examples, unit, sysusers, tmpfiles, completion, man pages)" \
  || fail "installed layout"
getent group sluice >/dev/null && pass "the sluice group exists" || fail "no sluice group"
[ "$(stat -c '%a %U' /var/lib/sluice 2>/dev/null)" = "700 root" ] && pass "/var/lib/sluice is 0700 root" \
  || fail "/var/lib/sluice: $(stat -c '%a %U' /var/lib/sluice 2>&1)"

for page in sluiced sluicectl sluice-policy sluice-replay; do
  out="$(MANWIDTH=100 man "$page" 2>"$work/man-$page.err")"
  if [ -n "$out" ] && grep -q '^NAME' <<<"$out" && ! grep -qi 'error' "$work/man-$page.err"; then
    pass "man $page renders ($(wc -l <<<"$out") lines)"
  else
    fail "man $page: $(head -3 "$work/man-$page.err")"
  fi
done

if out="$(/usr/sbin/sluiced --check-config /etc/sluice/default.yaml 2>&1)"; then
  pass "sluiced --check-config /etc/sluice/default.yaml"
else
  echo "$out" | sed 's/^/  | /'; fail "sluiced --check-config /etc/sluice/default.yaml"
fi

# sluice-replay from the installed files: 70 requests from one address in
# one second of a combined log, under the default policy (bursts of 60):
# 60 admitted.
for i in $(seq 70); do
  printf '198.18.0.7 - - [02/Dec/2026:10:00:00 +0000] "GET /v1/items/%d HTTP/1.1" 200 2 "-" "curl/7.88.1"\n' "$i"
done >"$work/replay.log"
if out="$(/usr/bin/sluice-replay --policy /etc/sluice/default.yaml --json "$work/replay.log" 2>&1)" &&
  grep -q '"admitted":60,' <<<"$out"; then
  pass "the installed sluice-replay decides a log (60 of 70 admitted)"
else
  echo "$out" | head -c 600 | sed 's/^/  | /'; fail "the installed sluice-replay"
fi

# systemd-analyze verify wants an instance; it checks the installed paths.
if out="$(systemd-analyze verify /lib/systemd/system/sluiced@default.service 2>&1)" && [ -z "$out" ]; then
  pass "systemd-analyze verify sluiced@default.service (installed)"
else
  echo "$out" | sed 's/^/  | /'; fail "systemd-analyze verify sluiced@default.service"
fi

# ---------------------------------------------------------------- a short run
. "$REPO/tests/integration/topology.sh"
. "$REPO/tests/integration/origin.sh"
SLUICE_APPLIANCE=sluiced SLUICED=/usr/sbin/sluiced
slt_init "slpkg-$$"
if topology_up >"$work/lab.log" 2>&1 && origin_start >>"$work/lab.log" 2>&1 &&
  appliance_start /etc/sluice/default.yaml 1 >>"$work/lab.log" 2>&1; then
  admitted="$(in_cli curl --noproxy '*' -s -o /dev/null -w '%{http_code}' --max-time 5 "http://$ORIGIN4/" 2>&1)"
  status="$(/usr/bin/sluicectl --socket "$SLT_CONTROL_SOCKET" status 2>&1)"
  if [ "$admitted" = 200 ] && grep -q 'default' <<<"$status"; then
    pass "the installed sluiced forwards (200) and the installed sluicectl reads its status"
  else
    echo "  curl: $admitted"; echo "$status" | sed 's/^/  | /'; fail "a short run of the installed sluiced"
  fi
  # Not in a subshell: appliance_stop waits for sluiced, this shell's child.
  if appliance_stop >"$work/stop.log"; then pass "the installed sluiced stops cleanly (exit 0 on SIGTERM)"
  else cat "$work/stop.log"; fail "the installed sluiced did not stop cleanly"; fi
else
  sed 's/^/  | /' "$work/lab.log" | tail -n 30
  fail "the lab with the installed sluiced did not come up"
fi
topology_down >/dev/null 2>&1

# ---------------------------------------------------------------- purge
dpkg --purge sluice >"$work/purge.log" 2>&1 || { cat "$work/purge.log"; fail "dpkg --purge"; }
installed=0
left=()
while read -r f; do
  [ -z "$f" ] || [ -d "$f" ] && continue   # directories may be shared (/usr/share/man, ...)
  [ -e "$f" ] && left+=("$f")
done <"$work/files"
for d in /etc/sluice /var/lib/sluice /run/sluice; do [ -e "$d" ] && left+=("$d"); done
if [ ${#left[@]} -eq 0 ]; then
  pass "dpkg --purge leaves nothing behind (the sluice group stays, as Debian policy keeps it)"
else
  printf '  left: %s\n' "${left[@]}"; fail "dpkg --purge left files behind"
fi

echo
if [ "$failures" -ne 0 ]; then echo "package-check: $failures failed"; exit 1; fi
echo "package-check: all passed"
