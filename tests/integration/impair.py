#!/usr/bin/python3
"""A userspace stand-in for `tc qdisc ... netem loss L% duplicate D% reorder R% delay Nms`,
for kernels built without sch_netem (topology.sh uses it when netem is missing).

Reads every frame arriving on --in (a veth that tc mirred fills with the frames
leaving the real interface) and sends it on --out with PACKET_QDISC_BYPASS, so
it skips the egress tc hook that redirected it. TCP frames (IPv4 and IPv6) are
impaired the way netem does it: lost with probability L, else sent twice with
probability D, and each copy goes at once with probability R (jumping the
queue) or after the delay. Everything else (ARP, neighbour discovery) passes at
once. Seeded, so a run is repeatable for the same frames.

Writes JSON counters to --stats at start (the readiness signal), every second,
and at exit; SIGTERM sends whatever it still holds, then exits.
"""

import argparse
import heapq
import os
import random
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from frame_shim import Shim  # noqa: E402


def is_tcp(frame):
    if len(frame) < 14:
        return False
    ethertype = struct.unpack_from("!H", frame, 12)[0]
    off = 14
    if ethertype == 0x8100 and len(frame) >= 18:  # one VLAN tag
        ethertype = struct.unpack_from("!H", frame, 16)[0]
        off = 18
    if ethertype == 0x0800 and len(frame) > off + 9:
        return frame[off + 9] == 6
    if ethertype == 0x86DD and len(frame) > off + 6:
        return frame[off + 6] == 6
    return False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--in", dest="inp", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--loss", type=float, default=0.0, help="percent")
    ap.add_argument("--dup", type=float, default=0.0, help="percent")
    ap.add_argument("--reorder", type=float, default=100.0, help="percent sent at once (netem's reorder)")
    ap.add_argument("--delay-ms", type=float, default=0.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--stats", required=True)
    a = ap.parse_args()

    rng = random.Random(a.seed)
    st = {"in": a.inp, "out": a.out, "frames": 0, "tcp": 0, "dropped": 0, "duplicated": 0,
          "delayed": 0, "immediate": 0}
    shim = Shim(a.inp, a.out, a.stats, st)
    held = []  # (due, seq, frame)
    order = [0]
    delay = a.delay_ms / 1000.0

    def release_due():
        now = time.monotonic()
        while held and held[0][0] <= now:
            shim.send(heapq.heappop(held)[2])

    def timeout():
        return 0.2 if not held else max(0.0, held[0][0] - time.monotonic())

    def on_frame(frame):
        st["frames"] += 1
        if not is_tcp(frame):
            shim.send(frame)
            return
        st["tcp"] += 1
        if rng.random() * 100.0 < a.loss:
            st["dropped"] += 1
            return
        copies = 1
        if rng.random() * 100.0 < a.dup:
            copies = 2
            st["duplicated"] += 1
        for _ in range(copies):
            if delay <= 0 or rng.random() * 100.0 < a.reorder:
                st["immediate"] += 1
                shim.send(frame)
            else:
                st["delayed"] += 1
                order[0] += 1
                heapq.heappush(held, (time.monotonic() + delay, order[0], frame))

    shim.run(on_frame, timeout=timeout, on_tick=release_due)
    # SIGTERM: what is still held goes out first.
    while held:
        shim.send(heapq.heappop(held)[2])
    shim.write_stats()

if __name__ == "__main__":
    main()
