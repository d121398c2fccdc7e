#!/usr/bin/python3
"""Keep-alive load held across an appliance crash, for the
wire-restart-under-load test (standard library only; run in the client
namespace, in the background).

Opens --connections keep-alive connections from --source to --host:--port
and sends GETs on each, one after another (each waits for its answer), for
--duration seconds; a request's path is --path with {c} (the connection) and
{i} (its request number) filled in. Once every connection has had
--ready-after answers, writes --ready (JSON). Then it goes on, across
whatever happens to the appliance, and never reconnects: a connection that
is reset or closed stops there, and says how. At the end writes --out
(JSON) and exits 0 (1 if it could not set up its connections).

Per connection: {"c": 0, "local_port": 40000, "answers": {"200": 60, "429": 900},
"after_ready": {"429": 400}, "end": "done" | "reset" | "closed" | "timeout" |
"protocol", "longest_wait_s": 0.62}. A request's wait is bounded by
--timeout seconds (long enough for TCP to retransmit across a restart);
the whole run by --duration plus that.
"""
import argparse
import json
import os
import socket
import sys
import threading
import time


class Gone(Exception):
    pass


def read_response(sock, buf, deadline):
    """One response (Content-Length framed); returns (status, rest of buf)."""
    while b"\r\n\r\n" not in buf:
        buf += recv(sock, deadline)
    head, _, rest = buf.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    parts = lines[0].split(b" ", 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1."):
        raise ValueError("not a status line: %r" % lines[0][:60])
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
        if name.strip().lower() == b"transfer-encoding":
            raise ValueError("a chunked response")
    while len(rest) < length:
        rest += recv(sock, deadline)
    return int(parts[1]), rest[length:]


def recv(sock, deadline):
    left = deadline - time.monotonic()
    if left <= 0:
        raise socket.timeout()
    sock.settimeout(left)
    try:
        b = sock.recv(65536)
    except ConnectionResetError:
        raise Gone("reset")
    if not b:
        raise Gone("closed")
    return b


def run_connection(args, c, sock, rec, ready, stop_at):
    buf = b""
    i = 0
    while time.monotonic() < stop_at:
        i += 1
        path = args.path.replace("{c}", str(c)).replace("{i}", str(i))
        sent = time.monotonic()
        try:
            sock.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: slt-load-across/1\r\n\r\n"
                          % (path, args.host)).encode())
            status, buf = read_response(sock, buf, sent + args.timeout)
        except Gone as e:
            rec["end"] = str(e)
            return
        except (BrokenPipeError, ConnectionAbortedError):
            rec["end"] = "closed"
            return
        except ConnectionResetError:
            rec["end"] = "reset"
            return
        except socket.timeout:
            rec["end"] = "timeout"
            return
        except (ValueError, OSError) as e:
            rec["end"] = "protocol"
            rec["error"] = str(e)
            return
        rec["longest_wait_s"] = max(rec["longest_wait_s"], round(time.monotonic() - sent, 3))
        key = str(status)
        rec["answers"][key] = rec["answers"].get(key, 0) + 1
        if ready.is_set():
            rec["after_ready"][key] = rec["after_ready"].get(key, 0) + 1
    rec["end"] = "done"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--host", required=True)
    ap.add_argument("--port", type=int, default=80)
    ap.add_argument("--source", required=True, help="the local address every connection is bound to")
    ap.add_argument("--connections", type=int, default=8, help="at most 64")
    ap.add_argument("--path", default="/load/c{c}/r{i}")
    ap.add_argument("--duration", type=float, default=8.0, help="seconds of load (at most 60)")
    ap.add_argument("--ready-after", type=int, default=100, help="answers on every connection before --ready")
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds one request may wait for its answer")
    ap.add_argument("--ready", required=True, help="JSON, written once the load is on")
    ap.add_argument("--out", required=True, help="JSON, at the end")
    args = ap.parse_args()
    if not 1 <= args.connections <= 64 or not 0 < args.duration <= 60:
        sys.exit("load_across.py: --connections must be 1..64 and --duration within 60 s")
    res = {"pid": os.getpid(), "connections": [], "errors": []}
    socks = []
    for c in range(args.connections):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.bind((args.source, 0))
        s.settimeout(args.timeout)
        try:
            s.connect((args.host, args.port))
        except OSError as e:
            res["errors"].append("connecting %d: %s" % (c, e))
            with open(args.out, "w") as f:
                json.dump(res, f)
            return 1
        socks.append(s)
        res["connections"].append({"c": c, "local_port": s.getsockname()[1], "answers": {}, "after_ready": {},
                                   "end": None, "longest_wait_s": 0.0})
    ready = threading.Event()
    stop_at = time.monotonic() + args.duration
    threads = [threading.Thread(target=run_connection, args=(args, c, socks[c], res["connections"][c], ready, stop_at),
                                daemon=True) for c in range(args.connections)]
    for t in threads:
        t.start()
    while time.monotonic() < stop_at:
        if all(sum(r["answers"].values()) >= args.ready_after or r["end"] for r in res["connections"]):
            break
        time.sleep(0.01)
    ready.set()
    tmp = args.ready + ".tmp"
    with open(tmp, "w") as f:
        json.dump(res, f)
    os.replace(tmp, args.ready)
    for t in threads:
        t.join(args.duration + args.timeout + 5)
    for s in socks:
        s.close()
    tmp = args.out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(res, f)
    os.replace(tmp, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
