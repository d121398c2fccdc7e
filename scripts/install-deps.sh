#!/usr/bin/env bash
# Installs the Debian 12 packages sluice needs that are not installed yet.
# Idempotent: with everything present it only checks and prints nothing.
#   scripts/install-deps.sh build   compiler, meson, the libraries
#   scripts/install-deps.sh demo    build + what the demo runs (network namespaces, nginx, clients)
#   scripts/install-deps.sh test    demo + clang and its sanitizer/fuzzer runtime, Chromium
set -euo pipefail

profile="${1:-build}"

build_pkgs=(
  g++ pkg-config meson ninja-build
  libdpdk-dev libtbb-dev libxxhash-dev libyaml-cpp-dev
  libsodium-dev        # SipHash for SYN cookies (dataplane/syn_cookie.cpp)
  libgtest-dev libgmock-dev libbenchmark-dev
  libhttp-parser-dev   # the same-run baseline in perf/parser_bench
  libhiredis-dev       # the control thread's link to Redis (cluster budgets)
  libssl-dev           # TLS to Redis (control/cluster/redis_tls.*): Debian 12's hiredis has none
  nlohmann-json3-dev   # the control protocol's JSON (control/json.*)
  libcli11-dev         # sluiced's options and sluicectl's subcommands, help from the same table
  libsystemd-dev       # sd_notify: READY, STATUS, STOPPING, WATCHDOG; journald fields
  zlib1g-dev liblzma-dev libzstd-dev  # sluice-replay reads gzip, xz and zstd logs (replay/input_stream.*)
  pandoc               # the man pages (man/): from markdown shared with --help and config/README.md
)
# The network-namespace integration tests (tests/integration) and the demo
# on veth pairs: sluiced between a client namespace and an origin namespace.
net_pkgs=(
  iproute2 ethtool procps    # ip netns/link/route, tc, nstat; offloads off; pgrep
  nginx                      # the origin
  curl wrk python3           # the clients (tests/integration/http_client.py: /usr/bin/python3)
  tcpdump                    # the demo's traffic captured for sluice-replay (and the replay tests')
)
test_pkgs=(
  clang libclang-rt-14-dev   # libFuzzer and the clang sanitizer runtimes
  chromium                   # the integration tests' browser (CORS preflight, TB08/TB09)
  redis-server               # cluster budgets' tests start their own Redis
  openssl                    # the TLS tests make their certificates
  haproxy                    # a load balancer that speaks the PROXY protocol (client_ip proxy_protocol's tests)
  zstd xz-utils              # compressed logs for sluice-replay's tests (tests/integration/replay_cli.sh)
  prometheus                 # promtool check metrics; a real server scrapes sluiced in a test
  systemd                    # systemd-analyze verify for the units
  man-db                     # the man pages are checked to render (man -l)
  valgrind                   # callgrind: the worker loop's instruction counts (perf/instructions.sh)
  debhelper devscripts lintian fakeroot dpkg-dev  # the package check (scripts/package-check.sh)
)

case "$profile" in
  build) pkgs=("${build_pkgs[@]}") ;;
  demo) pkgs=("${build_pkgs[@]}" "${net_pkgs[@]}") ;;
  test) pkgs=("${build_pkgs[@]}" "${net_pkgs[@]}" "${test_pkgs[@]}") ;;
  *) echo "install-deps.sh: unknown profile '$profile' (build, demo or test)" >&2; exit 2 ;;
esac

missing=()
for p in "${pkgs[@]}"; do
  if [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" != "install ok installed" ]; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps.sh: missing packages (${missing[*]}); run as root to install them" >&2
  exit 3
fi
if ! command -v apt-get >/dev/null; then
  echo "install-deps.sh: apt-get not found; sluice's scripts expect Debian 12" >&2
  exit 3
fi
echo "install-deps.sh: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# A fresh machine may have no package lists yet; refresh them once if the
# install cannot find a package.
if ! apt-get install -y --no-install-recommends "${missing[@]}"; then
  apt-get update
  apt-get install -y --no-install-recommends "${missing[@]}"
fi
