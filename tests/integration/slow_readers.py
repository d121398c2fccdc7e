#!/usr/bin/python3
"""Clients that ask for a large response and do not read it (the concurrency
tests' slow readers; standard library only; run in the client namespace).
Each of --hold's connections sends one GET of --path from --source with a
tiny receive buffer, reads nothing, and is closed after its own number of
seconds (unread data makes the close a reset). Bounded: every connection is
closed by max(--hold) seconds. Prints {"opened": N, "closed": [seconds...]}.

  slow_readers.py --host IP --source ADDR --path /big --hold 3,6
"""

import argparse
import json
import socket
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--path", default="/big")
    ap.add_argument("--hold", required=True, help="seconds each connection stays open, comma-separated")
    args = ap.parse_args()
    holds = [float(h) for h in args.hold.split(",")]
    if not holds or max(holds) > 30:
        raise SystemExit("slow_readers.py: --hold takes 1 to n seconds, none past 30")
    start = time.monotonic()
    conns = []
    for hold in holds:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 2048)
        s.bind((args.source, 0))
        s.settimeout(5)
        s.connect((args.host, 80))
        s.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (args.path, args.host)).encode())
        conns.append((hold, s))
    print(json.dumps({"opened": len(conns)}), flush=True)
    closed = []
    for hold, s in sorted(conns, key=lambda c: c[0]):
        time.sleep(max(0.0, start + hold - time.monotonic()))
        s.close()
        closed.append(round(time.monotonic() - start, 2))
    print(json.dumps({"closed": closed}), flush=True)


if __name__ == "__main__":
    main()
