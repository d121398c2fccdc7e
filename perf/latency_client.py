#!/usr/bin/python3
"""Sequential HTTP/1.1 GETs, one at a time, each timed from the first byte
sent (or the connect, with --new-connection) to the last byte of its answer;
prints the percentiles in microseconds. perf/latency.sh runs it from the
client namespace, through a Linux bridge and through sluiced in turn: the
client's own overhead is the same for both, so their difference is what the
appliance adds.

  latency_client.py HOST PATH --requests N [--new-connection] [--warmup N]

Prints one line: "p50 p90 p99 max" (microseconds). Exits 1 on a refused or
broken answer, a connection the server closes while keep-alive was asked
for, or a request unanswered after 5 s (a lost SYN or segment costs its
sender a retransmission timeout, 1 s or more: that is a sample like any
other, and shows in the max).
"""
import argparse
import socket
import sys
import time

TIMEOUT_S = 5.0


def read_response(sock, buf):
    """Reads one response (Content-Length framed, or to the close) from sock,
    starting with the bytes already in buf; returns (status, leftover)."""
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed before the head ended")
        buf += chunk
    head, _, rest = buf.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = int(lines[0].split(b" ")[1])
    length = None
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    if length is None:  # to the close
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return status, b""
            rest += chunk
    while len(rest) < length:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed inside the body")
        rest += chunk
    return status, rest[length:]


def connect(host):
    sock = socket.create_connection((host, 80), timeout=TIMEOUT_S)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def percentile(sorted_values, p):
    return sorted_values[min(len(sorted_values) - 1, int(p / 100.0 * len(sorted_values)))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("host")
    ap.add_argument("path")
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--new-connection", action="store_true",
                    help="a new connection per request (Connection: close), timed from the connect")
    args = ap.parse_args()
    if args.requests < 1 or args.warmup < 0:
        print("latency_client.py: --requests must be positive, --warmup not negative", file=sys.stderr)
        return 2
    close = args.new_connection
    request = (f"GET {args.path} HTTP/1.1\r\nHost: {args.host}\r\nUser-Agent: sluice-latency\r\n"
               f"{'Connection: close' if close else 'Connection: keep-alive'}\r\n\r\n").encode()
    samples = []
    sock = None
    left = b""
    try:
        for i in range(args.warmup + args.requests):
            start = time.perf_counter_ns()
            if close or sock is None:
                sock = connect(args.host)
                left = b""
                if not close:
                    start = time.perf_counter_ns()  # keep-alive: the connect is not a request's
            sock.sendall(request)
            status, left = read_response(sock, left)
            elapsed = time.perf_counter_ns() - start
            if status != 200:
                print(f"latency_client.py: request {i + 1} answered {status}", file=sys.stderr)
                return 1
            if close:
                sock.close()
                sock = None
            if i >= args.warmup:
                samples.append(elapsed / 1000.0)
    except (OSError, ConnectionError, ValueError, IndexError) as e:
        print(f"latency_client.py: {e}", file=sys.stderr)
        return 1
    finally:
        if sock is not None:
            sock.close()
    samples.sort()
    print(f"{percentile(samples, 50):.1f} {percentile(samples, 90):.1f} {percentile(samples, 99):.1f} "
          f"{samples[-1]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
