#!/usr/bin/python3
"""Rewrites the client's frames on their way into the appliance, the way an
attacker's own stack would send them, for the wire-* tests ("nothing walks
past the limiter"); on the origin's side, holds back what a test needs
held back. The frames come from the real client (curl, http_client.py)
through the same plumbing as impair.py: tc mirred redirects what leaves c0 to
a veth this reads (--in), and it sends the result on --out with
PACKET_QDISC_BYPASS. Standard library only; root, in the client namespace.

Modes (TCP frames to --port only; everything else passes unchanged):

  ipv6-dstopts   every IPv6 segment carries --count Destination Options
                 headers (8 bytes each, PadN) between the IPv6 and the TCP
                 header. The origin's stack walks any number; the appliance
                 once stopped at eight and bridged the segment unjudged.
  ipv4-options   every IPv4 segment carries 4 bytes of IP options
                 (NOP NOP NOP EOL); the header checksum is redone.
  ipv4-fragments every IPv4 segment with payload goes as two fragments: the
                 first 8 bytes of its TCP header (the ports), then the rest.
                 A stack reassembles them; the appliance cannot judge a
                 segment it never sees whole.
  overlap-decoy  before each segment whose payload starts with --match, a
                 decoy: the same segment cut to len(--decoy) bytes that are
                 --decoy instead. The appliance sees the decoy's bytes first;
                 a receiver that took the later copy would get the real ones.
  drop-synack    (on the origin's side) every IPv4 SYN-ACK from --port to
                 --to is dropped: the appliance's SYN to the origin goes
                 unanswered, and the flow stays being bound.

Writes JSON counters to --stats at start (the readiness signal), every
second, and at exit; stops on SIGTERM.
"""

import argparse
import os
import socket
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from frame_shim import Shim, checksum  # noqa: E402


def parse(frame, port):
    """(ip_version, l3, l4) of an untagged TCP frame to `port`, or None."""
    if len(frame) < 14:
        return None
    etype = struct.unpack_from("!H", frame, 12)[0]
    if etype == 0x0800 and len(frame) >= 34 and frame[23] == 6:
        l4 = 14 + (frame[14] & 0x0F) * 4
        v = 4
    elif etype == 0x86DD and len(frame) >= 74 and frame[20] == 6:
        l4 = 54
        v = 6
    else:
        return None
    if len(frame) < l4 + 20 or struct.unpack_from("!H", frame, l4 + 2)[0] != port:
        return None
    return v, 14, l4


def tcp_checksum(f, v, l3, l4, end):
    f[l4 + 16 : l4 + 18] = b"\0\0"
    seg = bytes(f[l4:end])
    if v == 4:
        pseudo = bytes(f[l3 + 12 : l3 + 20]) + struct.pack("!BBH", 0, 6, len(seg))
    else:
        pseudo = bytes(f[l3 + 8 : l3 + 40]) + struct.pack("!IxxxB", len(seg), 6)
    f[l4 + 16 : l4 + 18] = struct.pack("!H", checksum(pseudo + seg))


def ip_end(f, v, l3):
    if v == 4:
        return l3 + struct.unpack_from("!H", f, l3 + 2)[0]
    return l3 + 40 + struct.unpack_from("!H", f, l3 + 4)[0]


def synack_to(frame, port, dst):
    """Whether the untagged IPv4 frame is a SYN-ACK from `port` to address `dst` (4 bytes)."""
    if len(frame) < 34 or struct.unpack_from("!H", frame, 12)[0] != 0x0800 or frame[23] != 6:
        return False
    l4 = 14 + (frame[14] & 0x0F) * 4
    if len(frame) < l4 + 20 or frame[30:34] != dst:
        return False
    return struct.unpack_from("!H", frame, l4)[0] == port and frame[l4 + 13] & 0x12 == 0x12


def with_dstopts(frame, l3, count):
    f = bytearray(frame[: ip_end(frame, 6, l3)])
    nxt = f[l3 + 6]
    exts = b""
    for i in range(count):
        # next header, length 0 (8 bytes), PadN of 4 bytes of padding
        exts += bytes([60 if i + 1 < count else nxt, 0, 1, 4, 0, 0, 0, 0])
    f[l3 + 6] = 60
    struct.pack_into("!H", f, l3 + 4, struct.unpack_from("!H", f, l3 + 4)[0] + len(exts))
    return bytes(f[: l3 + 40]) + exts + bytes(f[l3 + 40 :])


def with_ipv4_options(frame, l3):
    f = bytearray(frame[: ip_end(frame, 4, l3)])
    ihl = (f[l3] & 0x0F) * 4
    if ihl + 4 > 60:
        return bytes(frame)
    f = f[: l3 + ihl] + bytearray(b"\x01\x01\x01\x00") + f[l3 + ihl :]
    f[l3] = 0x40 | ((ihl + 4) // 4)
    struct.pack_into("!H", f, l3 + 2, struct.unpack_from("!H", f, l3 + 2)[0] + 4)
    f[l3 + 10 : l3 + 12] = b"\0\0"
    struct.pack_into("!H", f, l3 + 10, checksum(bytes(f[l3 : l3 + ihl + 4])))
    return bytes(f)


def fragments_of(frame, l3, l4):
    """The IPv4 segment as two fragments: 8 bytes of transport header, then the rest."""
    end = ip_end(frame, 4, l3)
    ihl = l4 - l3
    out = []
    for start, stop, more in ((l4, l4 + 8, True), (l4 + 8, end, False)):
        f = bytearray(frame[:l4]) + bytearray(frame[start:stop])
        struct.pack_into("!H", f, l3 + 2, ihl + (stop - start))
        struct.pack_into("!H", f, l3 + 6, (0x2000 if more else 0) | ((start - l4) // 8))
        f[l3 + 10 : l3 + 12] = b"\0\0"
        struct.pack_into("!H", f, l3 + 10, checksum(bytes(f[l3:l4])))
        out.append(bytes(f))
    return out


def decoy_of(frame, v, l3, l4, decoy):
    """The segment cut to len(decoy) bytes of payload that are `decoy`."""
    end = ip_end(frame, v, l3)
    payload = l4 + (frame[l4 + 12] >> 4) * 4
    f = bytearray(frame[:payload]) + bytearray(decoy)
    f[l4 + 13] &= ~0x01 & 0xFF  # no FIN on the decoy
    grow = len(f) - end
    if v == 4:
        struct.pack_into("!H", f, l3 + 2, struct.unpack_from("!H", f, l3 + 2)[0] + grow)
        f[l3 + 10 : l3 + 12] = b"\0\0"
        struct.pack_into("!H", f, l3 + 10, checksum(bytes(f[l3:l4])))
    else:
        struct.pack_into("!H", f, l3 + 4, struct.unpack_from("!H", f, l3 + 4)[0] + grow)
    tcp_checksum(f, v, l3, l4, len(f))
    return bytes(f)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--in", dest="inp", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--mode", choices=["ipv6-dstopts", "ipv4-options", "ipv4-fragments", "overlap-decoy",
                                       "drop-synack"], required=True)
    ap.add_argument("--port", type=int, default=80)
    ap.add_argument("--count", type=int, default=9, help="ipv6-dstopts: headers per segment")
    ap.add_argument("--match", default="", help="overlap-decoy: payload prefix of the segments to precede")
    ap.add_argument("--decoy", default="", help="overlap-decoy: the decoy's payload")
    ap.add_argument("--to", default="", help="drop-synack: the IPv4 address the dropped SYN-ACKs go to")
    ap.add_argument("--stats", required=True)
    a = ap.parse_args()
    if a.mode == "overlap-decoy" and (not a.match or not a.decoy):
        ap.error("overlap-decoy needs --match and --decoy")
    if a.mode == "drop-synack":
        try:
            to = socket.inet_aton(a.to)
        except OSError:
            ap.error("drop-synack needs --to with an IPv4 address")

    st = {"mode": a.mode, "frames": 0, "rewritten": 0, "decoys": 0, "dropped": 0}
    shim = Shim(a.inp, a.out, a.stats, st)
    match, decoy = a.match.encode(), a.decoy.encode()

    def on_frame(frame):
        st["frames"] += 1
        if a.mode == "drop-synack":
            if synack_to(frame, a.port, to):
                st["dropped"] += 1
            else:
                shim.send(frame)
            return
        p = parse(frame, a.port)
        if p is not None:
            v, l3, l4 = p
            if a.mode == "ipv6-dstopts" and v == 6:
                frame = with_dstopts(frame, l3, a.count)
                st["rewritten"] += 1
            elif a.mode == "ipv4-options" and v == 4:
                frame = with_ipv4_options(frame, l3)
                st["rewritten"] += 1
            elif a.mode == "ipv4-fragments" and v == 4 and ip_end(frame, 4, l3) > l4 + (frame[l4 + 12] >> 4) * 4:
                first, frame = fragments_of(frame, l3, l4)
                shim.send(first)
                st["rewritten"] += 1
            elif a.mode == "overlap-decoy":
                start = l4 + (frame[l4 + 12] >> 4) * 4
                if frame[start : start + len(match)] == match and ip_end(frame, v, l3) - start > len(decoy):
                    shim.send(decoy_of(frame, v, l3, l4, decoy))
                    st["decoys"] += 1
        shim.send(frame)

    shim.run(on_frame)
    shim.write_stats()

if __name__ == "__main__":
    main()
