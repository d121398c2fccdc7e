#!/usr/bin/env python3
"""Counts the TCP SYNs (without ACK) an interface receives, for --seconds (at
most 120): in all, and from --src-net. Standard library only (AF_PACKET).

Prints one JSON object: {"syns": N, "from_net": M}.
"""

import argparse
import ipaddress
import json
import socket
import struct
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--iface", required=True)
    ap.add_argument("--src-net", required=True)
    ap.add_argument("--seconds", type=float, required=True)
    args = ap.parse_args()
    net = ipaddress.ip_network(args.src_net)
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.ntohs(0x0800))
    s.bind((args.iface, 0))
    s.settimeout(0.1)
    syns = from_net = 0
    end = time.monotonic() + min(args.seconds, 120.0)
    while time.monotonic() < end:
        try:
            frame, addr = s.recvfrom(2048)
        except socket.timeout:
            continue
        if addr[2] == socket.PACKET_OUTGOING or len(frame) < 34 + 14:
            continue
        ip = frame[14:]
        if ip[0] >> 4 != 4 or ip[9] != 6:
            continue
        tcp = ip[(ip[0] & 0x0F) * 4:]
        if len(tcp) < 14 or (tcp[13] & 0x12) != 0x02:
            continue
        syns += 1
        if ipaddress.ip_address(ip[12:16]) in net:
            from_net += 1
    print(json.dumps({"syns": syns, "from_net": from_net}))


if __name__ == "__main__":
    main()
