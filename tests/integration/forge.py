#!/usr/bin/python3
"""Forged TCP segments for the integration tests' blind-attack cases
(standard library only; run in the client namespace). Every mode is bounded
in count and time and stops by itself; spoofed sources must lie inside
198.18.0.0/15.

  forge.py adopt --iface c0 --dst-mac MAC --dst IP (--src ADDR | --src-net NET) --count N [--seconds S]
      N segments of connections nobody opened: ACK+PSH, distinct random ports and
      numbers, each payload a whole request head (GET --path, {i} its
      number). Prints {"sent": N, "seconds": S}.

  forge.py rst --iface c0 --dst IP --source ADDR --offset N [--payload] [--requests K] [--first]
      A real connection from ADDR to IP:80; its own numbers are read off the
      interface (an AF_PACKET socket sees the kernel's segments). With
      --first, one GET is answered first. Then one forged RST (RST+ACK with
      --ack) at the connection's next sequence number plus --offset (which
      may be negative), with 16 bytes of payload if --payload; then up to K
      GETs on the same socket, stopping at the first that is not answered
      200. Prints {"statuses": [...], "end": how the last ended, ...}.

  forge.py badsum --iface c0 --dst IP --source ADDR --bad tcp|ip --path P --decoy D
      A real connection from ADDR to IP:80. At its next sequence number, a
      forged GET of --decoy (as long as --path) whose TCP checksum (or IPv4
      header checksum) is wrong; then the socket's own GET of --path, which
      the kernel sends at the same number. Prints {"statuses": [...], ...}.
"""

import argparse
import ipaddress
import json
import os
import random
import socket
import struct
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from frame_shim import checksum  # noqa: E402
from http_client import PeerGone, ProtocolError, Reader, Timeout, read_response  # noqa: E402

ALLOWED = ipaddress.ip_network("198.18.0.0/15")
ETH_P_ALL = 0x0003


def tcp_frame(dst_mac, src_mac, src, dst, sport, dport, seq, ack, flags, payload=b"", window=502):
    tcp = struct.pack("!HHIIBBHHH", sport, dport, seq & 0xFFFFFFFF, ack & 0xFFFFFFFF, 5 << 4, flags, window, 0, 0)
    pseudo = src + dst + struct.pack("!BBH", 0, 6, len(tcp) + len(payload))
    tcp = tcp[:16] + struct.pack("!H", checksum(pseudo + tcp + payload)) + tcp[18:]
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp) + len(payload), random.getrandbits(16), 0x4000, 64, 6, 0,
                     src, dst)
    ip = ip[:10] + struct.pack("!H", checksum(ip)) + ip[12:]
    return dst_mac + src_mac + b"\x08\x00" + ip + tcp + payload


def allowed(addr):
    return ipaddress.ip_address(addr) in ALLOWED


def adopt(args):
    if args.src_net:
        net = ipaddress.ip_network(args.src_net)
        if not net.subnet_of(ALLOWED):
            sys.exit("forge.py: --src-net must lie inside 198.18.0.0/15")
        base, hosts = int(net.network_address), net.num_addresses
        pick = lambda: struct.pack("!I", base + random.randrange(1, max(hosts - 1, 2)))  # noqa: E731
    else:
        if not allowed(args.src):
            sys.exit("forge.py: --src must lie inside 198.18.0.0/15")
        one = socket.inet_aton(args.src)
        pick = lambda: one  # noqa: E731
    count = min(args.count, 20000)
    seconds = min(args.seconds, 30.0)
    dst_mac = bytes.fromhex(args.dst_mac.replace(":", ""))
    src_mac = bytes([0x02, 0x53, 0x59, 0x4E, 0, 2])
    dst = socket.inet_aton(args.dst)
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((args.iface, 0))
    # Each segment gets a 4-tuple of its own: two forgeries that drew the
    # same source port would be one connection to the appliance, and the
    # tests count one verdict per segment.
    used = set()

    def fresh_tuple():
        while True:
            t = (pick(), random.randrange(1024, 65535))
            if t not in used:
                used.add(t)
                return t

    t0 = time.monotonic()
    sent = 0
    while sent < count and time.monotonic() - t0 < seconds:
        due = min(count, int((time.monotonic() - t0) * count / max(seconds, 0.001)) + 1) if args.spread else count
        while sent < due:
            head = ("GET %s HTTP/1.1\r\nHost: forged\r\n\r\n" % args.path.replace("{i}", str(sent))).encode()
            src, sport = fresh_tuple()
            s.send(tcp_frame(dst_mac, src_mac, src, dst, sport, args.port,
                             random.getrandbits(32), random.getrandbits(32), 0x18, head))
            sent += 1
        time.sleep(0.001)
    print(json.dumps({"sent": sent, "seconds": round(time.monotonic() - t0, 3)}))
    return 0


class Sniffer:
    """The kernel's own segments of one connection, as they leave the interface."""

    def __init__(self, iface):
        self.s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        self.s.bind((iface, 0))
        self.s.setblocking(False)
        self.next_seq = None
        self.ack = None
        self.dst_mac = None
        self.src_mac = None

    def drain(self, src, sport, dst, dport):
        while True:
            try:
                frame, meta = self.s.recvfrom(65536)
            except (BlockingIOError, InterruptedError):
                return
            if len(frame) < 54 or frame[12:14] != b"\x08\x00" or frame[23] != 6:
                continue
            ihl = (frame[14] & 0x0F) * 4
            if frame[26:30] != src or frame[30:34] != dst:
                continue
            t = 14 + ihl
            sp, dp, seq, ack, off, flags = struct.unpack_from("!HHIIBB", frame, t)
            if sp != sport or dp != dport:
                continue
            total = struct.unpack_from("!H", frame, 16)[0]
            payload = total - ihl - (off >> 4) * 4
            end = (seq + payload + (1 if flags & 0x03 else 0)) & 0xFFFFFFFF
            if self.next_seq is None or ((end - self.next_seq) & 0xFFFFFFFF) < 0x80000000:
                self.next_seq = end
            if flags & 0x10:
                self.ack = ack
            self.dst_mac, self.src_mac = frame[0:6], frame[6:12]


def request_head(host, path):
    return ("GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: slt-forge/1\r\n\r\n" % (path, host)).encode()


def send_raw(iface, frame):
    raw = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    raw.bind((iface, 0))
    raw.send(bytes(frame))
    raw.close()


def get(sock, rd, host, path, timeout):
    try:
        sock.sendall(request_head(host, path))
    except OSError as e:
        return None, "send-reset" if isinstance(e, ConnectionResetError) else "send-closed"
    rd.deadline = time.monotonic() + timeout
    try:
        resp = read_response(rd, "GET")
    except PeerGone as e:
        return None, "reset" if e.reset else "closed"
    except (Timeout, socket.timeout):
        return None, "timeout"
    except ProtocolError:
        return None, "protocol"
    except OSError as e:
        return None, "reset" if isinstance(e, ConnectionResetError) else "error"
    return resp["status"], "closed" if resp["close_announced"] else "answered"


def real_connection(args):
    """A socket from --source, and the Sniffer that will read its numbers."""
    if not allowed(args.source) or not allowed(args.dst):
        sys.exit("forge.py: addresses must lie inside 198.18.0.0/15")
    sn = Sniffer(args.iface)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((args.source, 0))
    sock.settimeout(args.timeout)
    return sock, sn


def connect_numbered(args, sock, sn, out, first=False):
    """Connects `sock` to --dst:--port (and, with `first`, has GET --path
    {i}=0 answered), then reads the connection's next sequence number off the
    interface. Returns (reader, src, sport, dst), or None with out["end"]
    saying why (and the exit status in out["rc"])."""
    sock.connect((args.dst, args.port))
    rd = Reader(sock, time.monotonic() + args.timeout)
    src, sport = socket.inet_aton(args.source), sock.getsockname()[1]
    dst = socket.inet_aton(args.dst)
    if first:
        status, end = get(sock, rd, args.dst, args.path.replace("{i}", "0"), args.timeout)
        out["statuses"].append(status)
        if status != 200:
            out["end"], out["rc"] = end, 0
            return None
    time.sleep(0.2)  # the last ACK out on the wire
    sn.drain(src, sport, dst, args.port)
    if sn.next_seq is None or sn.dst_mac is None:
        out["end"], out["rc"] = "no-numbers", 1
        return None
    return rd, src, sport, dst


def rst(args):
    requests = min(args.requests, 200)
    sock, sn = real_connection(args)
    out = {"statuses": [], "end": None, "forged": None}
    try:
        numbered = connect_numbered(args, sock, sn, out, first=args.first)
        if numbered is None:
            print(json.dumps(out))
            return out.pop("rc")
        rd, src, sport, dst = numbered
        seq = (sn.next_seq + args.offset) & 0xFFFFFFFF
        flags = 0x04 | (0x10 if args.ack else 0)
        payload = b"x" * 16 if args.payload else b""
        send_raw(args.iface, tcp_frame(sn.dst_mac, sn.src_mac, src, dst, sport, args.port, seq, sn.ack or 0, flags, payload))
        out["forged"] = {"next_seq": sn.next_seq, "seq": seq, "offset": args.offset, "payload": len(payload)}
        time.sleep(0.2)
        for i in range(1, requests + 1):
            status, end = get(sock, rd, args.dst, args.path.replace("{i}", str(i)), args.timeout)
            out["statuses"].append(status)
            out["end"] = end
            if status != 200 or end != "answered":
                break
    except OSError as e:
        out["end"] = "error: %s" % e
    finally:
        sock.close()
    print(json.dumps(out))
    return 0


def badsum(args):
    if len(args.decoy) != len(args.path):
        sys.exit("forge.py: --decoy must be as long as --path (the two heads take the same sequence numbers)")
    sock, sn = real_connection(args)
    out = {"statuses": [], "end": None, "forged": None}
    try:
        numbered = connect_numbered(args, sock, sn, out)
        if numbered is None:
            print(json.dumps(out))
            return out.pop("rc")
        rd, src, sport, dst = numbered
        # The head get() sends, with the decoy's path: byte for byte as long.
        head = request_head(args.dst, args.decoy)
        frame = bytearray(tcp_frame(sn.dst_mac, sn.src_mac, src, dst, sport, args.port, sn.next_seq, sn.ack or 0, 0x18,
                                    head))
        at = 14 + 20 + 16 if args.bad == "tcp" else 14 + 10  # the TCP checksum, or the IPv4 header's
        frame[at] ^= 0x5A
        send_raw(args.iface, frame)
        out["forged"] = {"seq": sn.next_seq, "bad": args.bad, "bytes": len(head)}
        time.sleep(0.2)
        status, end = get(sock, rd, args.dst, args.path, args.timeout)
        out["statuses"].append(status)
        out["end"] = end
    except OSError as e:
        out["end"] = "error: %s" % e
    finally:
        sock.close()
    print(json.dumps(out))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="mode", required=True)
    a = sub.add_parser("adopt")
    a.add_argument("--iface", required=True)
    a.add_argument("--dst-mac", required=True)
    a.add_argument("--dst", required=True)
    a.add_argument("--port", type=int, default=80)
    g = a.add_mutually_exclusive_group(required=True)
    g.add_argument("--src")
    g.add_argument("--src-net")
    a.add_argument("--count", type=int, default=100, help="at most 20000")
    a.add_argument("--seconds", type=float, default=5.0, help="at most 30")
    a.add_argument("--spread", action="store_true", help="spread the count evenly over --seconds")
    a.add_argument("--path", default="/forged/{i}")
    r = sub.add_parser("rst")
    r.add_argument("--iface", required=True)
    r.add_argument("--dst", required=True)
    r.add_argument("--port", type=int, default=80)
    r.add_argument("--source", required=True)
    r.add_argument("--offset", type=int, required=True)
    r.add_argument("--payload", action="store_true")
    r.add_argument("--ack", action="store_true")
    r.add_argument("--first", action="store_true")
    r.add_argument("--requests", type=int, default=1, help="at most 200")
    r.add_argument("--path", default="/rst/{i}")
    r.add_argument("--timeout", type=float, default=5.0)
    b = sub.add_parser("badsum")
    b.add_argument("--iface", required=True)
    b.add_argument("--dst", required=True)
    b.add_argument("--port", type=int, default=80)
    b.add_argument("--source", required=True)
    b.add_argument("--bad", choices=("tcp", "ip"), required=True)
    b.add_argument("--path", required=True)
    b.add_argument("--decoy", required=True)
    b.add_argument("--timeout", type=float, default=5.0)
    args = ap.parse_args()
    return {"adopt": adopt, "rst": rst, "badsum": badsum}[args.mode](args)


if __name__ == "__main__":
    sys.exit(main())
