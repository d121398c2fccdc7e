#!/usr/bin/env python3
"""A slow-head crowd for the integration tests (standard library only).

Opens --per-source connections from each --source address to --host:--port,
sends the start of a request head on each (never its end), then one more
byte of it every --trickle seconds: the slowloris attack, which holds a
server's (or an appliance's) per-connection resources with almost no
bandwidth. Bounded: at most 1000 connections, and everything stops after
--duration seconds (at most 120).

Writes one JSON object per connection to --out:
  {"conn": 3, "source": "198.18.0.240", "connected": 0.01, "sent": 14,
   "status": 408, "first_byte": 3.02, "ended": 3.02, "end": "eof",
   "connection_close": true}
(times in seconds from the crowd's start; "status" is the status code of
the first response line received, null if none; "end" is "eof", "reset",
"refused" or "open" when the run stopped first), then a summary object.
"""

import argparse
import errno
import json
import selectors
import socket
import sys
import time


class Conn:
    def __init__(self, index, source):
        self.index = index
        self.source = source
        self.sock = None
        self.connected = None
        self.sent = 0
        self.received = b""
        self.first_byte = None
        self.ended = None
        self.end = "open"
        self.next_send = None

    def record(self):
        status = None
        line = self.received.split(b"\r\n", 1)[0]
        parts = line.split(b" ")
        if len(parts) >= 2 and parts[0].startswith(b"HTTP/") and parts[1].isdigit():
            status = int(parts[1])
        head = self.received.split(b"\r\n\r\n", 1)[0].lower()
        return {
            "conn": self.index,
            "source": self.source,
            "connected": self.connected,
            "sent": self.sent,
            "status": status,
            "first_byte": self.first_byte,
            "ended": self.ended,
            "end": self.end,
            "connection_close": b"\r\nconnection: close" in head,
        }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--host", required=True)
    ap.add_argument("--port", type=int, default=80)
    ap.add_argument("--source", action="append", required=True, help="a local address; repeatable")
    ap.add_argument("--per-source", type=int, default=4)
    ap.add_argument("--start", default="GET /crowd/{n} HTTP/1.1\r\nHost: crowd\r\nX-Slow: ",
                    help="the head's first bytes ({n}: the connection's number)")
    ap.add_argument("--trickle", type=float, default=1.0, help="seconds between the bytes that follow")
    ap.add_argument("--duration", type=float, default=10.0)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    if len(args.source) * args.per_source > 1000:
        sys.exit("slow_crowd.py: at most 1000 connections")
    duration = min(args.duration, 120.0)

    sel = selectors.DefaultSelector()
    conns = []
    t0 = time.monotonic()
    now = lambda: round(time.monotonic() - t0, 3)  # noqa: E731

    def finish(c, how):
        if c.sock is None:
            return
        c.end = how
        c.ended = now()
        try:
            sel.unregister(c.sock)
        except (KeyError, ValueError):
            pass
        c.sock.close()
        c.sock = None

    for source in args.source:
        for _ in range(args.per_source):
            c = Conn(len(conns), source)
            conns.append(c)
            family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
            s = socket.socket(family, socket.SOCK_STREAM)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            s.bind((source, 0))
            s.setblocking(False)
            err = s.connect_ex((args.host, args.port))
            if err not in (0, errno.EINPROGRESS):
                c.end, c.ended = "refused", now()
                s.close()
                continue
            c.sock = s
            sel.register(s, selectors.EVENT_READ | selectors.EVENT_WRITE, c)

    while time.monotonic() - t0 < duration and any(c.sock is not None for c in conns):
        for key, events in sel.select(timeout=0.05):
            c = key.data
            s = c.sock
            if s is None:
                continue
            if events & selectors.EVENT_WRITE and c.connected is None:
                if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) != 0:
                    finish(c, "refused")
                    continue
                c.connected = now()
                first = args.start.replace("{n}", str(c.index)).encode()
                try:
                    s.send(first)
                    c.sent += len(first)
                except OSError:
                    finish(c, "reset")
                    continue
                c.next_send = time.monotonic() + args.trickle
                sel.modify(s, selectors.EVENT_READ, c)
            if events & selectors.EVENT_READ:
                try:
                    data = s.recv(65536)
                except ConnectionResetError:
                    finish(c, "reset")
                    continue
                except BlockingIOError:
                    continue
                if not data:
                    finish(c, "eof")
                    continue
                if c.first_byte is None:
                    c.first_byte = now()
                c.received += data[:4096]
        t = time.monotonic()
        for c in conns:
            if c.sock is not None and c.next_send is not None and t >= c.next_send and c.first_byte is None:
                try:
                    c.sock.send(b"a")
                    c.sent += 1
                except OSError:
                    finish(c, "reset")
                    continue
                c.next_send = t + args.trickle

    for c in conns:
        if c.sock is not None:
            try:
                sel.unregister(c.sock)
            except (KeyError, ValueError):
                pass
            c.sock.close()
            c.sock = None
    with open(args.out, "w") as f:
        for c in conns:
            f.write(json.dumps(c.record()) + "\n")
        ends = {}
        for c in conns:
            ends[c.end] = ends.get(c.end, 0) + 1
        f.write(json.dumps({"summary": True, "connections": len(conns), "ends": ends, "elapsed": now()}) + "\n")


if __name__ == "__main__":
    main()
