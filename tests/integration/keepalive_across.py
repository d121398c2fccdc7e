#!/usr/bin/python3
"""Keep-alive connections held open across an appliance restart, for the
wire-adopt-restart test (standard library only; run in the client namespace,
in the background).

Before the restart: opens --connections keep-alive connections from --source
to --host:--port, one after the other, and sends one GET on each (request 1);
then one more connection with a POST head that announces --body-length bytes
(Content-Length) and only the first --partial of them, so that the
connection is mid-body. (The origin answers that POST at once, before its
body is in: the early answer is read and recorded then.) Writes what it saw
to --ready (JSON), then waits for the --go file to appear (at most --wait-go
seconds, at most 300; then it exits with status 2).

With --unbound N, N more connections are opened and sent nothing before the
restart (behind a SYN proxy with delayed binding, the origin has not heard
of them yet); after it, each sends one GET (request 1) on the same socket
("unbound": [...], records as the kept connections').

With --split-head N, N more connections each send the first half of a GET
head (request 1) before the restart and wait until it is acknowledged
(an appliance that holds a head split across segments acknowledges its
part); after it, the rest of the head on the same socket, and the answer
("split": [...], records as the kept connections'). With --split-kept K,
the first K kept connections do the same with their request 2: its first
half before the restart.

With --no-post there is no mid-body POST connection (for a test whose
appliance kills itself before then: wire-restart-mid-change).

With --smuggle N, N more connections each send a POST head that announces a
26-byte body (Content-Length: 26) and none of it, so that they are parked
inside a body when the appliance restarts; the origin's early answer is read.
After the restart each sends `GET /healthz HTTP/1.1\r\nX: ` (26 bytes: to the
origin, the body) and `GET --smuggle-path HTTP/1.1` with its end: what an
appliance that guessed the connection was between requests would judge as
an exempt /healthz, and what the origin would serve. Its record ("smuggled":
[...]) has the first response read and how the connection ended.

After the go file appears: on each kept connection, on the very same socket
(it never reconnects), a second GET (request 2), then on each a third
(request 3); then the rest of the POST's body on the mid-body connection,
and what came back (a response, a reset, a close, nothing). With
--mid-get PATH, a GET for PATH follows the body on that connection, and
what came back is its answer. Writes --out
(JSON) and exits 0; 1 if it could not set up the connections before the
restart. Every socket operation is bounded by --timeout seconds, and the
whole run by --wait-go plus 120 s. Before the restart it prints a line per
step on stdout (seconds since its start, what was done), so that a caller
that gives up waiting can tell where it stood.

Each request's record: {"i": 2, "path": "/adopt/c0/r2", "local_port": 40000,
"status": 200 or null, "end": "answered" | "reset" | "closed" | "timeout" |
"protocol" | "send-reset" | "send-closed" | "send-timeout", "ratelimit":
{"ratelimit-limit": "20", ...}, "close_announced": false, "t": seconds}.
"""

import argparse
import json
import os
import signal
import socket
import struct
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from http_client import PeerGone, ProtocolError, Reader, Timeout, read_response  # noqa: E402

RATELIMIT = ("ratelimit-limit", "ratelimit-remaining", "ratelimit-reset", "ratelimit-policy")


class OutOfTime(Exception):
    pass


T0 = time.monotonic()


def progress(what):
    """One line on stdout per step, so that a test that gives up waiting can say where it stood."""
    print("%.3f %s" % (time.monotonic() - T0, what), flush=True)


def write_json(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1, sort_keys=True)
        f.write("\n")
    os.replace(tmp, path)


def tcp_state(sock):
    """The socket's unacknowledged segments, timer backoff and retransmissions (TCP_INFO)."""
    try:
        info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)
    except OSError:
        return None
    # struct tcp_info: u8 state, ca_state, retransmits, probes, backoff, ...; u32 rto, ato,
    # snd_mss, rcv_mss, unacked (at byte 24)
    return {"retransmits": info[2], "backoff": info[4], "unacked": struct.unpack_from("I", info, 24)[0]}


def wait_acknowledged(sock, seconds):
    """Waits (bounded) until nothing the socket sent is unacknowledged; returns what still is."""
    end = time.monotonic() + seconds
    while True:
        st = tcp_state(sock)
        if st is None or st["unacked"] == 0 or time.monotonic() >= end:
            return st
        time.sleep(0.05)


class Kept:
    """One keep-alive connection: one socket, one reader, for its whole life."""

    def __init__(self, index, args, t0):
        self.index = index
        self.args = args
        self.t0 = t0
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.bind((args.source, 0))
        self.sock.settimeout(args.timeout)
        self.sock.connect((args.host, args.port))
        self.local_port = self.sock.getsockname()[1]
        self.rd = Reader(self.sock, time.monotonic() + args.timeout)
        self.requests = []
        self.sent_part = {}  # request number -> bytes of its head already sent

    def head(self, i):
        path = self.args.path.replace("{c}", str(self.index)).replace("{i}", str(i))
        return path, ("GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: slt-keepalive-across/1\r\n"
                      "X-Slt-Test: wire-adopt-restart\r\n\r\n" % (path, self.args.host))

    def send_part(self, i):
        """Sends the first half of request i's head (ending inside a field
        line) and waits until it is acknowledged; returns what is still not."""
        _, head = self.head(i)
        part = head[:len(head) // 2]
        self.sock.settimeout(self.args.timeout)
        self.sock.sendall(part.encode())
        self.sent_part[i] = len(part)
        return wait_acknowledged(self.sock, 5.0)

    def request(self, i):
        path, head = self.head(i)
        head = head[self.sent_part.get(i, 0):]
        try:
            port = self.sock.getsockname()[1]   # the same socket: the same port, whatever became of it
        except OSError:
            port = None
        rec = {"i": i, "path": path, "local_port": port, "status": None, "end": None, "ratelimit": {}, "close_announced": False,
               "t": round(time.monotonic() - self.t0, 3), "split": i in self.sent_part}
        self.requests.append(rec)
        self.sock.settimeout(self.args.timeout)
        try:
            self.sock.sendall(head.encode())
        except ConnectionResetError:
            rec["end"] = "send-reset"
            return rec
        except (BrokenPipeError, ConnectionAbortedError):
            rec["end"] = "send-closed"
            return rec
        except socket.timeout:
            rec["end"] = "send-timeout"
            return rec
        except OSError as e:
            rec["end"] = "send-error"
            rec["error"] = str(e)
            return rec
        rec["end"] = read_one(self.rd, self.args.timeout, rec)
        return rec

    def record(self):
        return {"conn": self.index, "local_port": self.local_port, "requests": self.requests}


def read_one(rd, timeout, rec):
    """Reads one response into rec; returns how the read ended."""
    rd.deadline = time.monotonic() + timeout
    try:
        resp = read_response(rd, rec.get("method", "GET"))
    except PeerGone as e:
        return "reset" if e.reset else "closed"
    except (Timeout, socket.timeout):
        return "timeout"
    except ProtocolError as e:
        rec["error"] = str(e)
        return "protocol"
    except OSError as e:
        rec["error"] = str(e)
        return "reset" if isinstance(e, ConnectionResetError) else "error"
    rec["status"] = resp["status"]
    rec["ratelimit"] = {k: resp["headers"][k] for k in RATELIMIT if k in resp["headers"]}
    rec["close_announced"] = resp["close_announced"]
    return "answered"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--host", required=True)
    ap.add_argument("--port", type=int, default=80)
    ap.add_argument("--source", required=True, help="the local address every connection is bound to")
    ap.add_argument("--connections", type=int, default=4, help="keep-alive connections (at most 64)")
    ap.add_argument("--path", default="/adopt/c{c}/r{i}", help="{c}: the connection's number from 0, {i}: the request's from 1")
    ap.add_argument("--post-path", default="/adopt/mid-body")
    ap.add_argument("--body-length", type=int, default=100000, help="the POST's Content-Length")
    ap.add_argument("--partial", type=int, default=1000, help="body bytes sent before the restart")
    ap.add_argument("--unbound", type=int, default=0, help="connections opened and left without a request (at most 64)")
    ap.add_argument("--split-head", type=int, default=0,
                    help="connections whose first head is split across the restart (at most 64)")
    ap.add_argument("--split-kept", type=int, default=0,
                    help="kept connections whose second head is split across the restart")
    ap.add_argument("--smuggle", type=int, default=0, help="connections parked inside a 26-byte body (at most 64)")
    ap.add_argument("--smuggle-path", default="/v1/smug{c}", help="what each tries to smuggle; {c}: its number")
    ap.add_argument("--mid-get", default="", help="a GET sent after the rest of the mid-body POST's body")
    ap.add_argument("--no-post", action="store_true",
                    help="no mid-body POST connection (for a test whose appliance is gone by then: one that "
                         "dies in the middle of a change)")
    ap.add_argument("--go", required=True, help="the file whose appearance starts the second part")
    ap.add_argument("--wait-go", type=float, default=120.0, help="seconds to wait for it (at most 300)")
    ap.add_argument("--timeout", type=float, default=5.0, help="seconds per socket operation")
    ap.add_argument("--ready", required=True, help="JSON: what the first part saw")
    ap.add_argument("--out", required=True, help="JSON: everything, once done")
    args = ap.parse_args()
    if not 1 <= args.connections <= 64:
        sys.exit("keepalive_across.py: --connections must be 1..64")
    if not 0 <= args.unbound <= 64:
        sys.exit("keepalive_across.py: --unbound must be 0..64")
    if not 0 <= args.split_head <= 64:
        sys.exit("keepalive_across.py: --split-head must be 0..64")
    if not 0 <= args.split_kept <= args.connections:
        sys.exit("keepalive_across.py: --split-kept must be 0..--connections")
    if not 0 <= args.smuggle <= 64:
        sys.exit("keepalive_across.py: --smuggle must be 0..64")
    if not 0 < args.partial < args.body_length:
        sys.exit("keepalive_across.py: --partial must be within the body")
    wait_go = min(max(args.wait_go, 0.0), 300.0)

    def out_of_time(signum, frame):
        raise OutOfTime("the whole run took over %d s" % int(wait_go + 120))

    signal.signal(signal.SIGALRM, out_of_time)
    signal.alarm(int(wait_go + 120))

    t0 = time.monotonic()
    res = {"pid": os.getpid(), "source": args.source, "connections": [], "mid_body": None,
           "connects": 0, "phase": "before", "errors": [], "smuggled": [], "unbound": [], "split": []}
    kept = []
    unbound = []
    split = []
    parked = []
    mid = None
    mid_rd = None
    try:
        # ---- before the restart
        try:
            for c in range(args.connections):
                k = Kept(c, args, t0)
                res["connects"] += 1
                kept.append(k)
                progress("connection %d: connected from port %d" % (c, k.local_port))
                r = k.request(1)
                progress("connection %d: request 1 %s %s" % (c, r["end"], r["status"]))
            for c in range(args.unbound):
                unbound.append(Kept(args.connections + c, args, t0))
                res["connects"] += 1
            progress("%d unbound connections connected" % args.unbound)
            for c in range(args.split_head):
                k = Kept(args.connections + args.unbound + c, args, t0)
                res["connects"] += 1
                split.append(k)
                left = k.send_part(1)
                progress("split connection %d: half a head sent, unacknowledged after: %s" % (c, left))
            for k in kept[:args.split_kept]:
                left = k.send_part(2)
                progress("kept connection %d: half its second head sent, unacknowledged after: %s" % (k.index, left))
            if not args.no_post:
                mid = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                mid.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                mid.bind((args.source, 0))
                mid.settimeout(args.timeout)
                mid.connect((args.host, args.port))
                res["connects"] += 1
        except OSError as e:
            res["errors"].append("opening the connections: %s" % e)
            res["connections"] = [k.record() for k in kept]
            res["unbound"] = [u.record() for u in unbound]
            res["split"] = [k.record() for k in split]
            write_json(args.ready, res)
            write_json(args.out, res)
            return 1
        if mid is not None:
            mb = {"local_port": mid.getsockname()[1], "path": args.post_path, "content_length": args.body_length,
                  "body_sent_before": 0, "early": None, "drained_after": 0, "rest_sent": 0, "rest_send": None,
                  "status": None, "end": None}
            res["mid_body"] = mb
            head = ("POST %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: slt-keepalive-across/1\r\n"
                    "X-Slt-Test: wire-adopt-restart\r\nContent-Type: application/octet-stream\r\n"
                    "Content-Length: %d\r\n\r\n" % (args.post_path, args.host, args.body_length))
            try:
                mid.sendall(head.encode() + b"x" * args.partial)
                mb["body_sent_before"] = args.partial
            except OSError as e:
                res["errors"].append("sending the POST head: %s" % e)
            # The origin answers a POST it discards before the body is in: read
            # that answer now, so that it is not taken for one after the restart.
            mid_rd = Reader(mid, time.monotonic() + 2.0)
            early = {"method": "POST", "status": None, "ratelimit": {}}
            early_end = read_one(mid_rd, 2.0, early)
            mb["early"] = {"end": early_end, "status": early["status"], "ratelimit": early["ratelimit"]}
            progress("mid-body POST from port %d: %d body bytes sent, early answer %s %s"
                     % (mb["local_port"], mb["body_sent_before"], early_end, early["status"]))
        for c in range(args.smuggle):
            ps = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            ps.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            ps.bind((args.source, 0))
            ps.settimeout(args.timeout)
            rec = {"conn": c, "path": args.smuggle_path.replace("{c}", str(c)), "early": None, "status": None,
                   "end": None}
            try:
                ps.connect((args.host, args.port))
                res["connects"] += 1
                ps.sendall(("POST /v1/park/%d HTTP/1.1\r\nHost: %s\r\nUser-Agent: slt-keepalive-across/1\r\n"
                            "Content-Type: text/plain\r\nContent-Length: 26\r\n\r\n" % (c, args.host)).encode())
            except OSError as e:
                res["errors"].append("parking connection %d: %s" % (c, e))
                ps.close()
                continue
            prd = Reader(ps, time.monotonic() + 2.0)
            early = {"method": "POST", "status": None, "ratelimit": {}}
            early_end = read_one(prd, 2.0, early)
            rec["early"] = {"end": early_end, "status": early["status"]}
            progress("parked connection %d: early answer %s %s" % (c, early_end, early["status"]))
            parked.append((ps, prd, rec))
            res["smuggled"].append(rec)
        # Nothing of it in flight when sluiced is killed: a segment lost with
        # it would be retransmitted on a backed-off timer, seconds later.
        if mid is not None:
            mb["in_flight_before"] = wait_acknowledged(mid, 5.0)
        for ps, _, _ in parked:
            wait_acknowledged(ps, 2.0)
        res["connections"] = [k.record() for k in kept]
        res["unbound"] = [u.record() for u in unbound]
        res["split"] = [k.record() for k in split]
        res["before_s"] = round(time.monotonic() - t0, 3)
        if mid is not None:
            progress("nothing unacknowledged on the mid-body connection: %s" % mb["in_flight_before"])
        write_json(args.ready, res)

        # ---- wait for the go file
        end = time.monotonic() + wait_go
        while not os.path.exists(args.go):
            if time.monotonic() >= end:
                res["errors"].append("no go file (%s) within %g s" % (args.go, wait_go))
                res["phase"] = "no-go"
                write_json(args.out, res)
                return 2
            time.sleep(0.05)
        res["phase"] = "after"
        res["go_at_s"] = round(time.monotonic() - t0, 3)

        # ---- after the restart: the same sockets, never a new connection
        for i in (2, 3):
            for k in kept:
                k.request(i)
        for u in unbound:
            u.request(1)
        for k in split:
            k.request(1)
        if mid is not None:
            # Whatever the mid-body connection has received since (it should be
            # nothing), then the rest of the body.
            mid.setblocking(False)
            try:
                while True:
                    b = mid.recv(65536)
                    if not b:
                        break
                    mb["drained_after"] += len(b)
            except (BlockingIOError, InterruptedError):
                pass
            except OSError:
                pass
            mid.setblocking(True)
            # Long enough for a retransmission after a backed-off timer.
            mid.settimeout(3 * args.timeout)
            mb["tcp_before_rest"] = tcp_state(mid)
            rest = b"x" * (args.body_length - args.partial)
            try:
                mid.sendall(rest)
                mb["rest_sent"] = len(rest)
                mb["rest_send"] = "sent"
            except ConnectionResetError:
                mb["rest_send"] = "reset"
            except (BrokenPipeError, ConnectionAbortedError):
                mb["rest_send"] = "closed"
            except socket.timeout:
                mb["rest_send"] = "timeout"
            except OSError as e:
                mb["rest_send"] = "error: %s" % e
            rec = {"method": "POST", "status": None, "ratelimit": {}}
            if args.mid_get and mb["rest_send"] == "sent":
                rec["method"] = "GET"
                mb["get_path"] = args.mid_get
                try:
                    mid.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: slt-keepalive-across/1\r\n\r\n"
                                 % (args.mid_get, args.host)).encode())
                except OSError as e:
                    mb["get_send"] = "error: %s" % e
            mb["end"] = read_one(mid_rd, 3 * args.timeout, rec)
            mb["tcp_after_rest"] = tcp_state(mid)
            mb["status"] = rec["status"]
            if mb["end"] != "answered":   # a reset seen on the send is the way it ended
                if "reset" in (mb["end"], mb["rest_send"]):
                    mb["end"] = "reset"
                elif mb["end"] == "timeout" and mb["rest_send"] == "closed":
                    mb["end"] = "closed"
            mb["ratelimit"] = rec["ratelimit"]
        for ps, prd, rec in parked:
            smuggle = ("GET /healthz HTTP/1.1\r\nX: GET %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (rec["path"], args.host))
            try:
                ps.settimeout(args.timeout)
                ps.sendall(smuggle.encode())
            except OSError as e:
                rec["end"] = "send-reset" if isinstance(e, ConnectionResetError) else "send-closed"
                continue
            got = {"method": "GET", "status": None, "ratelimit": {}}
            rec["end"] = read_one(prd, args.timeout, got)
            rec["status"] = got["status"]
        res["connections"] = [k.record() for k in kept]
        res["unbound"] = [u.record() for u in unbound]
        res["split"] = [k.record() for k in split]
        res["elapsed_s"] = round(time.monotonic() - t0, 3)
        write_json(args.out, res)
        return 0
    except OutOfTime as e:
        res["errors"].append(str(e))
        res["connections"] = [k.record() for k in kept]
        write_json(args.out, res)
        return 2
    finally:
        signal.alarm(0)
        for k in kept + unbound + split:
            k.sock.close()
        for ps, _, _ in parked:
            ps.close()
        if mid is not None:
            mid.close()


if __name__ == "__main__":
    sys.exit(main())
