#!/usr/bin/env python3
"""The folders are the architecture: checks every #include in the tree
against what each folder may depend on, so that an arrow running back up
(the limiter reaching into HTTP/1, the data plane into the control plane,
DPDK outside the files that own it) fails the build's tests, not a review.

  layering.py SOURCE_ROOT

Prints one line per include that breaks a rule (file:line: what and why)
and exits 1 if there is any; 0 and a summary otherwise."""
import os
import re
import sys

# What each folder's files may include from the project's other folders.
# The limiter speaks no protocol: it and what it reads (policy, net, time)
# reach nothing in http/.
MAY_INCLUDE = {
    "lib/time": set(),
    "lib/net": set(),
    "lib/policy": {"net", "time"},
    "lib/limiter": {"net", "policy", "time"},
    "lib/http": {"limiter", "net", "policy", "time"},
    "dataplane": {"http", "limiter", "net", "policy", "time"},
    "control": {"dataplane", "http", "limiter", "net", "policy", "time"},
    "control/cluster": {"control", "limiter", "net", "policy", "time"},
    "replay": {"control", "dataplane", "http", "limiter", "net", "policy", "time"},
}
# A protocol rule the policy loader reads: a field name is an RFC 9110 token.
EXCEPTIONS = {("lib/policy/policy_loader.cpp", "http/token_chars.h")}
# DPDK is confined to the files that drive the NIC, the RCU and the EAL.
DPDK_FOLDERS = {"dataplane", "control", "src", "perf"}
# receive_checksum.h reads only the mbuf's offload flag constants (header-only),
# so that the unit tests can hold the port's verdicts to the software sum.
DPDK_IN_DATAPLANE = {"dataplane/ports.cpp", "dataplane/worker.cpp", "dataplane/receive_checksum.h"}
DPDK_IN_CONTROL = {"control/policy_publisher.cpp", "control/telemetry.cpp"}
PROJECT = {"http", "limiter", "net", "policy", "time", "dataplane", "control", "replay", "src", "perf"}

INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^">]+)[">]', re.M)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: layering.py SOURCE_ROOT")
    root = sys.argv[1]
    problems, checked = [], 0
    for folder, allowed in MAY_INCLUDE.items():
        path = os.path.join(root, folder)
        for name in sorted(os.listdir(path)):
            if not name.endswith((".h", ".cpp", ".inc")):
                continue
            rel = f"{folder}/{name}"
            text = open(os.path.join(path, name), encoding="utf-8", errors="replace").read()
            for m in INCLUDE.finditer(text):
                checked += 1
                line = text.count("\n", 0, m.start()) + 1
                inc = m.group(2)
                if inc.startswith("rte_"):
                    top = folder.split("/")[0]
                    if top not in DPDK_FOLDERS or (top == "dataplane" and rel not in DPDK_IN_DATAPLANE) or (
                            top == "control" and rel not in DPDK_IN_CONTROL):
                        problems.append(f"{rel}:{line}: includes DPDK's {inc} outside the files that own DPDK")
                    continue
                if m.group(1) != '"' or "/" not in inc:
                    continue
                target = inc.rsplit("/", 1)[0]
                if target.split("/")[0] not in PROJECT:
                    continue
                own = folder.split("/", 1)[1] if folder.startswith("lib/") else folder
                if target == own or (rel, inc) in EXCEPTIONS:
                    continue
                if target not in allowed:
                    problems.append(f"{rel}:{line}: includes {inc}, but {folder}/ may include only from "
                                    f"{', '.join(sorted(allowed)) or 'itself'}")
    for p in problems:
        print(p)
    print(f"layering: {checked} includes checked in {len(MAY_INCLUDE)} folders, {len(problems)} break a rule")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
