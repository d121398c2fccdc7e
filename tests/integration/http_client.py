#!/usr/bin/python3
"""A small HTTP/1.1 client for the integration tests (standard library only).

Opens one TCP connection (or --connections of them, one after the other or
--parallel), sends --count requests on each, either one after the other on the
kept-alive connection (sequential) or all in one write (pipeline), optionally
written in --piece-byte pieces --piece-delay ms apart so heads are split across
segments, and reads the responses with a real HTTP/1.1 response framer
(Content-Length, chunked, read-until-close, 1xx, HEAD/204/304).

Prints one JSON object per line: one per response
  {"conn": 0, "i": 1, "status": 200, "headers": {...}, "body": "...", "closed": false, ...}
("closed": the peer closed the connection right after this response), one per
connection ({"event": "end", ...}) and a summary ({"summary": true, ...}).

Exit status: 0 fine; 1 protocol error (a malformed response, bytes after a
response that said "Connection: close", ...); 2 the total --timeout ran out;
3 a connection could not be opened; 4 the peer closed or reset a connection
without answering a request that no earlier response had said would go
unanswered.

Path and header values may hold {i} (the request's number on its connection,
from 1), {c} (the connection's number, from 0) and {n} (the request's number
overall, from 1).

--plan runs connections that differ, one after the other in this one process
(so a test's requests follow each other within milliseconds, not the
~0.5 s it takes to start a client): a JSON list with one object per
connection, each key optional and defaulting to the command line's:
  [{"count": 60, "path": "/a/{i}"}, {"count": 1, "method": "POST", "body": "x",
    "headers": ["CF-Connecting-IP: 198.19.6.1"], "mode": "pipeline"}]
("headers" are added to the -H ones). An entry's "each" is a list of
per-request settings (keys path, method, body, headers, host_header: the
Host field's value), request i taking element (i-1) modulo its length:
  [{"count": 4, "each": [{"path": "/a"}, {"path": "/b", "headers": ["X: y"]}]}]
"""

import argparse
import json
import socket
import sys
import threading
import time

MAX_HEAD = 64 * 1024


def set_max_head(n):
    global MAX_HEAD
    MAX_HEAD = n


class ProtocolError(Exception):
    pass


class Timeout(Exception):
    pass


class PeerGone(Exception):
    """EOF or reset where a response (or more of one) was expected."""

    def __init__(self, reset):
        super().__init__("connection reset by peer" if reset else "connection closed by peer")
        self.reset = reset


class Reader:
    def __init__(self, sock, deadline):
        self.sock = sock
        self.deadline = deadline
        self.buf = bytearray()
        self.eof = False
        self.reset = False

    def fill(self):
        if self.eof:
            return False
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            raise Timeout()
        self.sock.settimeout(remaining)
        try:
            data = self.sock.recv(65536)
        except socket.timeout:
            raise Timeout()
        except ConnectionResetError:
            self.eof = True
            self.reset = True
            return False
        if not data:
            self.eof = True
            return False
        self.buf += data
        return True

    def line(self, limit=MAX_HEAD):
        while True:
            nl = self.buf.find(b"\n")
            if nl >= 0:
                if nl == 0 or self.buf[nl - 1] != 0x0D:
                    raise ProtocolError("line not ended by CRLF: %r" % bytes(self.buf[: nl + 1][:80]))
                out = bytes(self.buf[: nl - 1])
                del self.buf[: nl + 1]
                return out
            if len(self.buf) > limit:
                raise ProtocolError("line longer than %d bytes" % limit)
            if not self.fill():
                raise PeerGone(self.reset)

    def exact(self, n):
        while len(self.buf) < n:
            if not self.fill():
                raise PeerGone(self.reset)
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def until_close(self):
        while self.fill():
            pass
        out = bytes(self.buf)
        self.buf.clear()
        return out

    def wait_close(self, seconds):
        """True if the peer closes within `seconds` with no further bytes.
        Bytes that arrive are left in the buffer (the caller decides)."""
        end = min(self.deadline, time.monotonic() + seconds)
        while not self.eof and not self.buf:
            remaining = end - time.monotonic()
            if remaining <= 0:
                return False
            self.sock.settimeout(remaining)
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                return False
            except ConnectionResetError:
                self.eof = self.reset = True
                break
            if not data:
                self.eof = True
                break
            self.buf += data
        return self.eof and not self.buf


def tokens(value):
    return [t.strip().lower() for t in value.split(",") if t.strip()]


def read_response(rd, method):
    """One final response (1xx interim responses are skipped and returned
    separately). Returns a dict."""
    interim = []
    while True:
        start = rd.line()
        parts = start.split(b" ", 2)
        if len(parts) < 2 or parts[0] not in (b"HTTP/1.1", b"HTTP/1.0") or len(parts[1]) != 3 or not parts[1].isdigit():
            raise ProtocolError("bad status line: %r" % start[:120])
        version = parts[0].decode()
        status = int(parts[1])
        reason = parts[2].decode("latin-1") if len(parts) > 2 else ""
        headers = []
        size = len(start)
        while True:
            ln = rd.line()
            size += len(ln) + 2
            if size > MAX_HEAD:
                raise ProtocolError("response head over %d bytes" % MAX_HEAD)
            if not ln:
                break
            if ln[:1] in (b" ", b"\t"):
                raise ProtocolError("obsolete line folding in response head")
            colon = ln.find(b":")
            if colon <= 0 or ln[colon - 1 : colon] in (b" ", b"\t"):
                raise ProtocolError("bad header line: %r" % ln[:120])
            name = ln[:colon].decode("latin-1")
            if not all(c.isalnum() or c in "!#$%&'*+-.^_`|~" for c in name):
                raise ProtocolError("bad header name: %r" % name)
            headers.append((name, ln[colon + 1 :].strip(b" \t").decode("latin-1")))
        if 100 <= status < 200 and status != 101:
            interim.append(status)
            continue
        break

    hmap = {}
    for name, value in headers:
        key = name.lower()
        hmap[key] = value if key not in hmap else hmap[key] + ", " + value
    conn_tokens = tokens(hmap.get("connection", ""))
    close = "close" in conn_tokens or (version == "HTTP/1.0" and "keep-alive" not in conn_tokens)

    body = b""
    framing = "none"
    if method == "HEAD" or status in (204, 304) or status == 101:
        framing = "none"
    elif "transfer-encoding" in hmap:
        codings = tokens(hmap["transfer-encoding"])
        if "content-length" in hmap:
            raise ProtocolError("response has both Transfer-Encoding and Content-Length")
        if codings and codings[-1] == "chunked":
            framing = "chunked"
            chunks = []
            while True:
                size_line = rd.line()
                size_txt = size_line.split(b";", 1)[0].strip(b" \t")
                if not size_txt or any(c not in b"0123456789abcdefABCDEF" for c in size_txt) or len(size_txt) > 15:
                    raise ProtocolError("bad chunk size line: %r" % size_line[:80])
                n = int(size_txt, 16)
                if n == 0:
                    while rd.line():  # trailer fields, up to the empty line
                        pass
                    break
                chunks.append(rd.exact(n))
                if rd.exact(2) != b"\r\n":
                    raise ProtocolError("chunk data not followed by CRLF")
            body = b"".join(chunks)
        else:
            framing = "close"
            body = rd.until_close()
            close = True
    elif "content-length" in hmap:
        values = set(v.strip() for v in hmap["content-length"].split(","))
        if len(values) != 1 or not next(iter(values)).isdigit():
            raise ProtocolError("bad Content-Length: %r" % hmap["content-length"])
        framing = "length"
        body = rd.exact(int(values.pop()))
    else:
        framing = "close"
        body = rd.until_close()
        close = True

    return {
        "version": version,
        "status": status,
        "reason": reason,
        "interim": interim,
        "headers": hmap,
        "header_lines": headers,
        "framing": framing,
        "body_bytes": body,
        "close_announced": close,
    }


def subst(s, i, c, n):
    return s.replace("{i}", str(i)).replace("{c}", str(c)).replace("{n}", str(n))


def build_request(args, i, c, n):
    if args.each:
        per = args.each[(i - 1) % len(args.each)]
        args = argparse.Namespace(**vars(args))
        for key in ("path", "method", "body", "host_header"):
            if key in per:
                setattr(args, key, per[key])
        args.plan_headers = args.plan_headers + list(per.get("headers", []))
    path = subst(args.path, i, c, n)
    # args is the connection's spec (see spec_for).
    host = args.host_header or (("[%s]" % args.host if ":" in args.host else args.host) + ("" if args.port == 80 else ":%d" % args.port))
    lines = ["%s %s HTTP/1.1" % (args.method, path), "Host: " + host]
    if not args.no_default_headers:
        lines += ["User-Agent: slt-http-client/1", "Accept: */*"]
    for h in args.header + args.plan_headers:
        lines.append(subst(h, i, c, n))
    body = subst(args.body, i, c, n).encode() if args.body is not None else b""
    if args.body is not None:
        lines.append("Content-Length: %d" % len(body))
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


class Counter:
    def __init__(self):
        self.lock = threading.Lock()
        self.n = 0

    def next(self):
        with self.lock:
            self.n += 1
            return self.n


def send_pieces(sock, data, piece, delay_s, deadline):
    """Writes data, in pieces if asked. Returns None or the error's name when
    the peer is gone (the caller goes on to read what came back)."""
    try:
        if not piece:
            sock.settimeout(max(0.001, deadline - time.monotonic()))
            sock.sendall(data)
            return None
        for off in range(0, len(data), piece):
            if time.monotonic() >= deadline:
                raise Timeout()
            sock.settimeout(max(0.001, deadline - time.monotonic()))
            sock.sendall(data[off : off + piece])
            if delay_s and off + piece < len(data):
                time.sleep(delay_s)
        return None
    except socket.timeout:
        raise Timeout()
    except (BrokenPipeError, ConnectionResetError) as e:
        return type(e).__name__


def spec_for(args, plan, c):
    """The connection's settings: the command line's, overridden by its plan entry."""
    spec = argparse.Namespace(**vars(args))
    spec.plan_headers = []
    spec.each = []
    if plan is not None:
        entry = plan[c]
        for key in ("count", "path", "method", "body", "mode", "host_header"):
            if key in entry:
                setattr(spec, key, entry[key])
        spec.plan_headers = list(entry.get("headers", []))
        spec.each = list(entry.get("each", []))
    return spec


def run_connection(args, c, counter, t0, deadline, out):
    """One connection. Appends response records to `out`; returns the
    connection's end record."""
    end = {"event": "end", "conn": c, "sent": 0, "answered": 0, "unanswered": 0, "peer_closed": False,
           "reset": False, "error": None, "error_kind": None, "write_error": None, "mss": None,
           "local": None, "connect_s": None}
    started = time.monotonic()
    end["started"] = round(started - t0, 6)  # on the response records' clock ("t")
    family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        if args.source:
            sock.bind((args.source, 0))
        if args.piece or args.nodelay:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(max(0.001, min(args.connect_timeout, deadline - time.monotonic())))
        try:
            sock.connect((args.host, args.port))
        except (socket.timeout, OSError) as e:
            end["error"] = "connect: %s" % (e if str(e) else type(e).__name__)
            end["error_kind"] = "connect"
            return end
        end["connect_s"] = round(time.monotonic() - started, 4)
        end["local"] = "%s:%d" % sock.getsockname()[:2]
        try:
            end["mss"] = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG)
        except OSError:
            pass
        rd = Reader(sock, deadline)
        delay_s = args.piece_delay / 1000.0

        if args.raw_file:
            with open(args.raw_file, "rb") as f:
                raw = f.read()
            requests = [("RAW", None)] * args.count
            batch = raw
        else:
            requests = []
            for i in range(1, args.count + 1):
                n = counter.next()
                method = args.each[(i - 1) % len(args.each)].get("method", args.method) if args.each else args.method
                requests.append((method, build_request(args, i, c, n)))
            batch = b"".join(r[1] for r in requests)

        def record(i, resp):
            r = {"conn": c, "i": i, "status": resp["status"], "reason": resp["reason"],
                 "version": resp["version"], "interim": resp["interim"], "headers": resp["headers"],
                 "framing": resp["framing"], "body_len": len(resp["body_bytes"]),
                 "body": resp["body_bytes"][: args.body_max].decode("utf-8", "replace"),
                 "close_announced": resp["close_announced"], "closed": False,
                 "t": round(time.monotonic() - t0, 6)}
            if args.all_header_lines:
                r["header_lines"] = resp["header_lines"]
            out.append(r)
            return r

        def after_close_announced(r):
            # The response said the connection ends here: no more bytes may come.
            if rd.buf:
                raise ProtocolError("%d bytes after a response that announced Connection: close: %r"
                                    % (len(rd.buf), bytes(rd.buf[:60])))
            closed = rd.wait_close(args.close_wait)
            if rd.buf:
                raise ProtocolError("%d bytes after a response that announced Connection: close: %r"
                                    % (len(rd.buf), bytes(rd.buf[:60])))
            r["closed"] = closed
            end["peer_closed"] = closed
            end["reset"] = rd.reset

        if args.mode == "pipeline" or args.raw_file:
            werr = send_pieces(sock, batch, args.piece, delay_s, deadline)
            end["write_error"] = werr
            end["sent"] = len(requests)
            for idx, (method, _) in enumerate(requests, 1):
                try:
                    resp = read_response(rd, method)
                except PeerGone as g:
                    end["peer_closed"] = True
                    end["reset"] = g.reset
                    end["unanswered"] = len(requests) - idx + 1
                    end["error"] = "%s before the response to request %d" % (g, idx)
                    end["error_kind"] = "gone"
                    break
                end["answered"] += 1
                r = record(idx, resp)
                if resp["close_announced"]:
                    after_close_announced(r)
                    end["unanswered"] = len(requests) - idx
                    break
            else:
                if rd.buf:
                    raise ProtocolError("%d unexpected bytes after the last response: %r" % (len(rd.buf), bytes(rd.buf[:60])))
                # Did the peer close anyway? Look without waiting long.
                r_last = out[-1] if out and out[-1]["conn"] == c else None
                if rd.wait_close(args.idle_check) and r_last is not None:
                    r_last["closed"] = True
                    end["peer_closed"] = True
        else:  # sequential, keep-alive
            for idx, (method, data) in enumerate(requests, 1):
                werr = send_pieces(sock, data, args.piece, delay_s, deadline)
                end["sent"] += 1
                try:
                    resp = read_response(rd, method)
                except PeerGone as g:
                    end["peer_closed"] = True
                    end["reset"] = g.reset
                    end["unanswered"] = 1
                    end["write_error"] = werr
                    end["error"] = "%s before the response to request %d" % (g, idx)
                    end["error_kind"] = "gone"
                    break
                end["answered"] += 1
                r = record(idx, resp)
                if rd.buf:
                    raise ProtocolError("%d unexpected bytes after response %d: %r" % (len(rd.buf), idx, bytes(rd.buf[:60])))
                if resp["close_announced"]:
                    after_close_announced(r)
                    break
                if idx < len(requests) and rd.eof:
                    r["closed"] = True
            else:
                r_last = out[-1] if out and out[-1]["conn"] == c else None
                if rd.wait_close(args.idle_check) and r_last is not None:
                    r_last["closed"] = True
                    end["peer_closed"] = True
                elif rd.buf:
                    raise ProtocolError("%d unexpected bytes after the last response: %r" % (len(rd.buf), bytes(rd.buf[:60])))
        return end
    except ProtocolError as e:
        end["error"] = "protocol: %s" % e
        end["error_kind"] = "protocol"
        return end
    except Timeout:
        end["error"] = "timeout (total %.1fs) with %d of %d requests answered" % (args.timeout, end["answered"], args.count)
        end["error_kind"] = "timeout"
        return end
    finally:
        sock.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--host", required=True, help="address to connect to (IPv4 or IPv6)")
    ap.add_argument("--port", type=int, default=80)
    ap.add_argument("--source", help="local address to bind (the client's identity)")
    ap.add_argument("--count", type=int, default=1, help="requests per connection")
    ap.add_argument("--connections", type=int, default=1)
    ap.add_argument("--parallel", action="store_true", help="run the connections at the same time")
    ap.add_argument("--mode", choices=["sequential", "pipeline"], default="sequential")
    ap.add_argument("--method", default="GET")
    ap.add_argument("--path", default="/")
    ap.add_argument("-H", "--header", action="append", default=[], help="'Name: value', repeatable")
    ap.add_argument("--host-header", help="the Host field's value (default: --host[:port])")
    ap.add_argument("--no-default-headers", action="store_true", help="no User-Agent and Accept")
    ap.add_argument("--body", help="request body (sent with Content-Length)")
    ap.add_argument("--raw-file", help="send this file's bytes as is; expect --count responses")
    ap.add_argument("--piece", type=int, default=0, help="write in pieces of this many bytes (TCP_NODELAY)")
    ap.add_argument("--piece-delay", type=float, default=0.0, help="ms between pieces")
    ap.add_argument("--nodelay", action="store_true")
    ap.add_argument("--timeout", type=float, default=20.0, help="total seconds for everything")
    ap.add_argument("--connect-timeout", type=float, default=10.0)
    ap.add_argument("--close-wait", type=float, default=2.0,
                    help="seconds to wait for the close after a response that announced it")
    ap.add_argument("--idle-check", type=float, default=0.05,
                    help="seconds to watch for a close after the last response otherwise")
    ap.add_argument("--body-max", type=int, default=512, help="body bytes to print per response")
    ap.add_argument("--max-head", type=int, default=MAX_HEAD, help="largest response head taken (bytes)")
    ap.add_argument("--all-header-lines", action="store_true", help="also print the header lines in order")
    ap.add_argument("--plan", help="JSON list of per-connection settings (see above); sets --connections")
    ap.add_argument("--out", help="write the JSON lines here instead of stdout")
    args = ap.parse_args()
    set_max_head(args.max_head)
    plan = None
    if args.plan:
        try:
            plan = json.loads(args.plan)
            assert isinstance(plan, list) and plan and all(isinstance(e, dict) for e in plan)
        except (ValueError, AssertionError):
            ap.error("--plan must be a non-empty JSON list of objects")
        unknown = set(k for e in plan for k in e) - {"count", "path", "method", "body", "mode", "headers", "each", "host_header"}
        if unknown:
            ap.error("--plan: unknown keys %s" % sorted(unknown))
        args.connections = len(plan)
    specs = [spec_for(args, plan, c) for c in range(args.connections)]
    if any(sp.count < 1 for sp in specs) or args.connections < 1 or sum(sp.count for sp in specs) > 100000:
        ap.error("--count and --connections must be positive and bounded")

    t0 = time.monotonic()
    deadline = t0 + args.timeout
    counter = Counter()
    results = [[] for _ in range(args.connections)]
    ends = [None] * args.connections

    def worker(c):
        try:
            ends[c] = run_connection(specs[c], c, counter, t0, deadline, results[c])
        except Timeout:
            ends[c] = {"event": "end", "conn": c, "error": "timeout", "error_kind": "timeout",
                       "sent": 0, "answered": len(results[c]), "unanswered": 0, "peer_closed": False}

    if args.parallel and args.connections > 1:
        threads = [threading.Thread(target=worker, args=(c,), daemon=True) for c in range(args.connections)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()) + 1.0)
        for c in range(args.connections):
            if ends[c] is None:
                ends[c] = {"event": "end", "conn": c, "error": "timeout", "error_kind": "timeout",
                           "sent": 0, "answered": len(results[c]), "unanswered": 0, "peer_closed": False}
    else:
        for c in range(args.connections):
            if time.monotonic() >= deadline:
                ends[c] = {"event": "end", "conn": c, "error": "timeout before connecting", "error_kind": "timeout",
                           "sent": 0, "answered": 0, "unanswered": 0, "peer_closed": False}
                continue
            worker(c)

    elapsed = time.monotonic() - t0
    statuses = {}
    kinds = [e.get("error_kind") for e in ends]
    for rs in results:
        for r in rs:
            statuses[str(r["status"])] = statuses.get(str(r["status"]), 0) + 1
    summary = {
        "summary": True,
        "connections": args.connections,
        "requests": sum(sp.count for sp in specs),
        "answered": sum(len(rs) for rs in results),
        "statuses": statuses,
        "elapsed": round(elapsed, 4),
        "errors": [e["error"] for e in ends if e.get("error")],
    }
    lines = []
    for c in range(args.connections):
        lines += [json.dumps(r, sort_keys=True) for r in results[c]]
        lines.append(json.dumps(ends[c], sort_keys=True))
    lines.append(json.dumps(summary, sort_keys=True))
    text = "\n".join(lines) + "\n"
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)

    if "protocol" in kinds:
        return 1
    if "timeout" in kinds:
        return 2
    if "connect" in kinds:
        return 3
    if "gone" in kinds:
        return 4
    return 0


if __name__ == "__main__":
    sys.exit(main())
