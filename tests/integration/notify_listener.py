#!/usr/bin/env python3
"""A stand-in for systemd's end of NOTIFY_SOCKET, for tests/integration/systemd.sh.

Binds an AF_UNIX datagram socket at SOCKET and writes one line per datagram
to LOG, flushed at once:

    SECONDS pid=PID KEY=VALUE|KEY=VALUE...

SECONDS is CLOCK_MONOTONIC, PID the sender's (SO_PASSCRED: what systemd
checks for NotifyAccess=main). Newlines between assignments become '|'.
Exits on SIGTERM or SIGINT, or after --max-seconds (a bound, so that a test
that forgets it leaves nothing running), removing the socket.

    notify_listener.py SOCKET LOG [--max-seconds N]
"""
import argparse
import os
import signal
import socket
import struct
import sys
import time

SCM_CREDENTIALS = 2  # <sys/socket.h>; Python's socket module does not name it
CREDENTIALS = struct.Struct("iII")  # struct ucred: pid, uid, gid


def sender_pid(ancillary):
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == SCM_CREDENTIALS and len(data) >= CREDENTIALS.size:
            return CREDENTIALS.unpack_from(data)[0]
    return 0


def serve(sock, log, deadline):
    while time.monotonic() < deadline:
        sock.settimeout(max(0.01, min(0.5, deadline - time.monotonic())))
        try:
            data, ancillary, _, _ = sock.recvmsg(4096, socket.CMSG_SPACE(CREDENTIALS.size))
        except socket.timeout:
            continue
        text = data.decode("utf-8", "replace").strip("\n").replace("\n", "|")
        log.write(f"{time.monotonic():.3f} pid={sender_pid(ancillary)} {text}\n")
        log.flush()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("socket")
    p.add_argument("log")
    p.add_argument("--max-seconds", type=float, default=120.0)
    a = p.parse_args()

    def stop(_signum, _frame):
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
    try:
        sock.bind(a.socket)
    except OSError as e:
        print(f"notify_listener: cannot bind {a.socket}: {e.strerror}", file=sys.stderr)
        return 1
    try:
        with open(a.log, "a", encoding="utf-8") as log:
            serve(sock, log, time.monotonic() + a.max_seconds)
    finally:
        sock.close()
        os.unlink(a.socket)
    return 0


if __name__ == "__main__":
    sys.exit(main())
