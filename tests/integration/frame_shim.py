"""What the frame shims (impair.py, mangle.py) share: the two packet sockets
topology.sh's slt_shim_start wires them to, the loop that reads frames and
hands each to the shim, the JSON stats file that says it is ready and what it
did, and the Internet checksum (also used by replay.py). Standard library
only."""

import json
import os
import select
import signal
import socket
import struct
import time

ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_QDISC_BYPASS = 20
PACKET_OUTGOING = 4


def checksum(data):
    """RFC 1071 ones' complement sum of `data`, complemented."""
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


class Shim:
    """Reads the frames arriving on `inp` and sends frames on `out` past its
    egress hook (PACKET_QDISC_BYPASS, so the redirect does not take them
    again). `stats` is a dict written to `stats_path` at start (the
    readiness signal), every second and at exit; counters "sent" and
    "send_errors" are kept here."""

    def __init__(self, inp, out, stats_path, stats):
        self.rx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        self.rx.bind((inp, ETH_P_ALL))
        self.rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        self.tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
        self.tx.bind((out, 0))
        self.tx.setsockopt(SOL_PACKET, PACKET_QDISC_BYPASS, 1)
        self.stats_path = stats_path
        self.stats = stats
        self.stats.setdefault("sent", 0)
        self.stats.setdefault("send_errors", 0)
        self.stop = False

    def send(self, frame):
        try:
            self.tx.send(frame)
            self.stats["sent"] += 1
        except OSError:
            self.stats["send_errors"] += 1

    def write_stats(self):
        tmp = self.stats_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.stats, f, sort_keys=True)
        os.replace(tmp, self.stats_path)

    def run(self, on_frame, timeout=lambda: 0.2, on_tick=lambda: None):
        """Calls on_frame(frame) for each frame received (not the ones this
        host sends), on_tick() after each wait, until SIGTERM or SIGINT;
        `timeout()` says how long a wait may last."""

        def on_term(_sig, _frm):
            self.stop = True

        signal.signal(signal.SIGTERM, on_term)
        signal.signal(signal.SIGINT, on_term)
        self.write_stats()
        last_stats = time.monotonic()
        while not self.stop:
            on_tick()
            try:
                ready, _, _ = select.select([self.rx], [], [], timeout())
            except InterruptedError:
                continue
            for _ in range(256 if ready else 0):
                try:
                    frame, addr = self.rx.recvfrom(65536, socket.MSG_DONTWAIT)
                except BlockingIOError:
                    break
                if addr[2] != PACKET_OUTGOING:
                    on_frame(frame)
            if time.monotonic() - last_stats >= 1.0:
                self.write_stats()
                last_stats = time.monotonic()
