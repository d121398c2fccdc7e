#!/usr/bin/python3
"""Asks DPDK's telemetry socket one question (standard library only).

  telemetry.py SOCKET_PATH COMMAND     prints the JSON reply to COMMAND
                                       (/sluice/stats, /sluice/status,
                                       /sluice/runs, /, /info, /ethdev/list, ...)
  telemetry.py --find-socket [PREFIX]  prints the telemetry socket of the EAL
                                       --file-prefix PREFIX, or with no PREFIX
                                       those of every prefix, one per line
  --wait SECONDS (either form)         waits that long for the socket to answer

The socket is <runtime dir>/dpdk_telemetry.v2 (another process of the same
prefix gets dpdk_telemetry.v2:1, :2, ...); the runtime dir is
/var/run/dpdk/PREFIX for root ($RUNTIME_DIRECTORY/dpdk/PREFIX when that is
set; $XDG_RUNTIME_DIR or /tmp instead of /var/run for other users), as in
DPDK's EAL and dpdk-telemetry.py. EAL's default PREFIX is "rte". Only sockets
that accept a connection are printed: a process killed with SIGKILL leaves
its socket file behind.

The protocol (DPDK telemetry v2, AF_UNIX SOCK_SEQPACKET): on connect the
server sends one JSON greeting ({"version", "pid", "max_output_len"}); each
message sent is a command ("/cmd" or "/cmd,params"), and each reply is one
JSON object {"/cmd": value}; value is null when the command failed.

Exit status: 0 fine; 1 no socket, or it did not answer; 2 the reply was not
JSON; 3 the reply's value was null (printed all the same: an unknown command,
or sluiced's commands after it unregistered them); 64 usage.
"""

import glob
import json
import os
import socket
import sys
import time

SOCKET_NAME = "dpdk_telemetry.v2"
GREETING_MAX = 1024


def runtime_dir(prefix):
    """DPDK's runtime directory for PREFIX (its EAL's own rule)."""
    base = os.environ.get("RUNTIME_DIRECTORY")
    if not base:
        base = "/var/run" if os.getuid() == 0 else os.environ.get("XDG_RUNTIME_DIR", "/tmp")
    return os.path.join(base, "dpdk", prefix)


def connect(path, timeout=5.0):
    """A connected socket and the server's greeting, or raises OSError."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    sock.settimeout(timeout)
    try:
        sock.connect(path)
        greeting = json.loads(sock.recv(GREETING_MAX).decode())
    except (OSError, ValueError):
        sock.close()
        raise OSError("no DPDK telemetry server answers on " + path)
    return sock, greeting


def live_sockets(prefix):
    """The sockets of PREFIX (every prefix if None) that accept a connection."""
    pattern = os.path.join(runtime_dir(prefix if prefix is not None else "*"), SOCKET_NAME + "*")
    found = []
    # The plain name first, then instances :1, :2, ... in order.
    for path in sorted(glob.glob(pattern), key=lambda p: (os.path.dirname(p), len(p), p)):
        try:
            sock, _ = connect(path, timeout=1.0)
        except OSError:
            continue
        sock.close()
        found.append(path)
    return found


def ask(path, command):
    """The reply to COMMAND, parsed."""
    sock, greeting = connect(path)
    try:
        sock.sendall(command.encode())
        # One reply is one message; the greeting says how large it can be.
        reply = sock.recv(int(greeting.get("max_output_len", 16384)) + 1)
    finally:
        sock.close()
    return json.loads(reply.decode())


def until(deadline, attempt):
    """attempt() until it returns something true or the deadline passes."""
    while True:
        result = attempt()
        if result or time.monotonic() >= deadline:
            return result
        time.sleep(0.1)


def usage(message):
    sys.stderr.write("telemetry.py: " + message + "\n" + __doc__)
    return 64


def main(argv):
    args = list(argv)
    wait = 0.0
    if "--wait" in args:
        i = args.index("--wait")
        try:
            wait = float(args[i + 1])
        except (IndexError, ValueError):
            return usage("--wait needs a number of seconds")
        del args[i:i + 2]
    deadline = time.monotonic() + wait

    if args and args[0] == "--find-socket":
        if len(args) > 2:
            return usage("--find-socket takes at most one PREFIX")
        prefix = args[1] if len(args) == 2 else None
        found = until(deadline, lambda: live_sockets(prefix))
        if not found:
            where = runtime_dir(prefix) if prefix is not None else runtime_dir("")
            sys.stderr.write("telemetry.py: no live DPDK telemetry socket under " + where + "\n")
            return 1
        for path in found:
            print(path)
        return 0

    if len(args) != 2 or args[0].startswith("--"):
        return usage("expected SOCKET_PATH COMMAND or --find-socket [PREFIX]")
    path, command = args
    if not command.startswith("/"):
        return usage("a command starts with '/': " + command)

    def attempt():
        try:
            return (ask(path, command),)
        except OSError:
            return None
        except ValueError as e:
            return ("not json", str(e))

    result = until(deadline, attempt)
    if result is None:
        sys.stderr.write("telemetry.py: no DPDK telemetry server answers on " + path + "\n")
        return 1
    if len(result) == 2:
        sys.stderr.write("telemetry.py: the reply was not JSON: " + result[1] + "\n")
        return 2
    reply = result[0]
    print(json.dumps(reply))
    if isinstance(reply, dict) and len(reply) == 1 and next(iter(reply.values())) is None:
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
