#!/usr/bin/python3
"""An earlier frame of a connection on the wire again, for the tb-syn-replay
and tb-stale-origin-segment tests (standard library only; root, run in the
client namespace).

Opens one TCP connection from --source to --host:80, watching the client's
interface (--ifname, default c0) for its SYN and, with --origin-netns, the
origin's interface in that namespace (--origin-ifname, default o0) for the
origin's SYN-ACK. Then:

  --mode syn-dup        right after the handshake, the very frame of the
                        opening SYN again (what a retransmitted or duplicated
                        SYN that crossed the SYN-ACK looks like)
  --mode syn-midstream  after the first response, a SYN with another sequence
                        number (what a client can send on purpose)
  --mode stale-synack   just before request --at, the very frame of the
                        origin's SYN-ACK again, from the origin's side (an old
                        segment of the origin's, duplicated or reordered on
                        the way: its timestamp is older than what the client
                        has seen since)

and sends --count GET requests on the connection, one after the other,
reading each response with http_client.py's framer, until one is not a 200
or the connection ends. Prints the statuses the way results.py does
("200x20 429.", "." = the peer closed after it; "!gone", "!timeout",
"!protocol" = how it ended without an answer); exit status 0 unless the
setup itself failed.
"""

import argparse
import ctypes
import os
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from frame_shim import ETH_P_ALL, PACKET_OUTGOING, checksum  # noqa: E402
from http_client import PeerGone, ProtocolError, Reader, Timeout, read_response  # noqa: E402

CLONE_NEWNET = 0x40000000


def tcp_offset(frame):
    """The TCP header's offset in an untagged Ethernet/IPv4 frame, or None."""
    if len(frame) < 34 or frame[12:14] != b"\x08\x00" or frame[23] != 6:
        return None
    return 14 + (frame[14] & 0x0F) * 4


def with_seq(frame, seq):
    """The frame with another TCP sequence number (TCP checksum redone)."""
    f = bytearray(frame)
    t = tcp_offset(f)
    total = struct.unpack("!H", f[16:18])[0]
    f[t + 4 : t + 8] = struct.pack("!I", seq)
    f[t + 16 : t + 18] = b"\0\0"
    seg = bytes(f[t : 14 + total])
    pseudo = bytes(f[26:34]) + struct.pack("!BBH", 0, 6, len(seg))
    f[t + 16 : t + 18] = struct.pack("!H", checksum(pseudo + seg))
    return bytes(f)


def packet_socket(ifname, netns=None):
    """An AF_PACKET socket on ifname, in another network namespace if asked
    (a socket stays in the namespace it was made in)."""
    if netns is None:
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        s.bind((ifname, 0))
        return s
    libc = ctypes.CDLL(None, use_errno=True)
    own = os.open("/proc/self/ns/net", os.O_RDONLY)
    other = os.open("/run/netns/" + netns, os.O_RDONLY)
    try:
        if libc.setns(other, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), "setns %s" % netns)
        try:
            s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
            s.bind((ifname, 0))
        finally:
            if libc.setns(own, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns back")
    finally:
        os.close(own)
        os.close(other)
    return s


def catch(sock, deadline, match):
    """The first outgoing frame on sock that match(frame, tcp_offset) accepts."""
    while time.monotonic() < deadline:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            frame, addr = sock.recvfrom(65536)
        except socket.timeout:
            return None
        t = tcp_offset(frame)
        if addr[2] == PACKET_OUTGOING and t is not None and match(frame, t):
            return frame
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", choices=["syn-dup", "syn-midstream", "stale-synack"], required=True)
    ap.add_argument("--source", required=True, help="IPv4 address to bind")
    ap.add_argument("--host", required=True, help="the origin's IPv4 address")
    ap.add_argument("--port", type=int, default=80)
    ap.add_argument("--ifname", default="c0")
    ap.add_argument("--origin-netns", help="the origin's namespace (stale-synack)")
    ap.add_argument("--origin-ifname", default="o0")
    ap.add_argument("--count", type=int, default=25)
    ap.add_argument("--at", type=int, default=21, help="stale-synack: before this request")
    ap.add_argument("--timeout", type=float, default=20.0)
    args = ap.parse_args()
    if args.mode == "stale-synack" and not args.origin_netns:
        ap.error("stale-synack needs --origin-netns")
    deadline = time.monotonic() + args.timeout

    cli = packet_socket(args.ifname)
    org = packet_socket(args.origin_ifname, args.origin_netns) if args.origin_netns else None
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((args.source, 0))
    lport = sock.getsockname()[1]
    sock.settimeout(5)
    sock.connect((args.host, args.port))

    def ports(frame, t):
        return struct.unpack("!HH", frame[t : t + 4])

    syn = catch(cli, min(deadline, time.monotonic() + 1), lambda f, t: ports(f, t) == (lport, args.port)
                and f[t + 13] & 0x12 == 0x02)
    if syn is None:
        sys.exit("replay.py: did not see the connection's SYN on %s" % args.ifname)
    isn = struct.unpack("!I", syn[tcp_offset(syn) + 4 :][:4])[0]
    print("local port %d, ISN %d" % (lport, isn), file=sys.stderr)

    if args.mode == "syn-dup":
        cli.send(syn)
        print("sent the SYN again after the handshake", file=sys.stderr)
        time.sleep(0.05)

    rd = Reader(sock, deadline)
    words = []  # [status, count, closed]
    for i in range(1, args.count + 1):
        if args.mode == "syn-midstream" and i == 2:
            cli.send(with_seq(syn, (isn + 1000003) & 0xFFFFFFFF))
            print("sent a SYN (seq ISN+1000003) after the first response", file=sys.stderr)
            time.sleep(0.05)
        if args.mode == "stale-synack" and i == args.at:
            # The origin's SYN-ACK, from what its interface sent since the
            # start (with delayed binding it answered the first request's SYN).
            synack = catch(org, min(deadline, time.monotonic() + 1), lambda f, t: ports(f, t) == (args.port, lport)
                           and f[t + 13] & 0x12 == 0x12)
            if synack is None:
                sys.exit("replay.py: did not see the origin's SYN-ACK on %s in %s" % (args.origin_ifname, args.origin_netns))
            time.sleep(0.02)   # the origin's later segments carry later timestamps
            org.send(synack)
            print("sent the origin's SYN-ACK again before request %d" % i, file=sys.stderr)
            time.sleep(0.05)
        req = "GET /replay/%s/%d HTTP/1.1\r\nHost: %s\r\nUser-Agent: slt-replay/1\r\n\r\n" % (args.mode, i, args.host)
        try:
            sock.sendall(req.encode())
            resp = read_response(rd, "GET")
        except PeerGone:
            words.append(["!gone", 1, False])
            break
        except (Timeout, socket.timeout):
            words.append(["!timeout", 1, False])
            break
        except ProtocolError as e:
            words.append(["!protocol", 1, False])
            print("protocol error: %s" % e, file=sys.stderr)
            break
        st = str(resp["status"])
        if words and words[-1][0] == st:
            words[-1][1] += 1
        else:
            words.append([st, 1, False])
        if resp["close_announced"]:
            words[-1][2] = rd.wait_close(2.0)
            break
        if st != "200":
            break
    sock.close()
    print(" ".join(("%sx%d" % (w, k) if k > 1 else w) + ("." if c else "") for w, k, c in words))
    return 0


if __name__ == "__main__":
    sys.exit(main())
