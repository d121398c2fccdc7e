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
import json
import os
import random
import select
import signal
import socket
import struct
import time

ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_QDISC_BYPASS = 20
PACKET_OUTGOING = 4


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
    rx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    rx.bind((a.inp, ETH_P_ALL))
    rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
    tx.bind((a.out, 0))
    tx.setsockopt(SOL_PACKET, PACKET_QDISC_BYPASS, 1)

    st = {"in": a.inp, "out": a.out, "frames": 0, "tcp": 0, "dropped": 0, "duplicated": 0,
          "delayed": 0, "immediate": 0, "sent": 0, "send_errors": 0}
    held = []  # (due, seq, frame)
    seq = 0
    stop = False

    def write_stats():
        tmp = a.stats + ".tmp"
        with open(tmp, "w") as f:
            json.dump(st, f, sort_keys=True)
        os.replace(tmp, a.stats)

    def send(frame):
        try:
            tx.send(frame)
            st["sent"] += 1
        except OSError:
            st["send_errors"] += 1

    def on_term(_sig, _frm):
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    write_stats()
    last_stats = time.monotonic()
    delay = a.delay_ms / 1000.0

    while not stop:
        now = time.monotonic()
        while held and held[0][0] <= now:
            send(heapq.heappop(held)[2])
        timeout = 0.2 if not held else max(0.0, held[0][0] - now)
        try:
            ready, _, _ = select.select([rx], [], [], timeout)
        except InterruptedError:
            continue
        if ready:
            # Drain what is there without blocking.
            for _ in range(256):
                try:
                    frame, addr = rx.recvfrom(65536, socket.MSG_DONTWAIT)
                except BlockingIOError:
                    break
                if addr[2] == PACKET_OUTGOING:
                    continue
                st["frames"] += 1
                if not is_tcp(frame):
                    send(frame)
                    continue
                st["tcp"] += 1
                if rng.random() * 100.0 < a.loss:
                    st["dropped"] += 1
                    continue
                copies = 1
                if rng.random() * 100.0 < a.dup:
                    copies = 2
                    st["duplicated"] += 1
                for _ in range(copies):
                    if delay <= 0 or rng.random() * 100.0 < a.reorder:
                        st["immediate"] += 1
                        send(frame)
                    else:
                        st["delayed"] += 1
                        seq += 1
                        heapq.heappush(held, (time.monotonic() + delay, seq, frame))
        if time.monotonic() - last_stats >= 1.0:
            write_stats()
            last_stats = time.monotonic()

    while held:
        send(heapq.heappop(held)[2])
    write_stats()


if __name__ == "__main__":
    main()
