#!/usr/bin/env python3
"""The path corpus of the wire-path-corpus test: some hundreds of spellings
of request paths (prefixes x separators x encodings x dot segments x
targets: /healthz, which the policy exempts, /v1/..., which has a bucket of
its own, and others, which the catch-all counts), each sent as a raw request
over its own TCP connection to every origin port given, through the
appliance. For every answer it tells:

  refused         the appliance's own 400 (its JSON body, no X-Loc)
  agreed          the appliance's judgement (exempt: no RateLimit-Policy; or
                  the bucket RateLimit-Policy names) is the location the origin
                  served (X-Loc: healthz, v1, root)
  origin-refused  the origin answered without serving a location (its own 400)
  disagreed       the judgement and the served location differ
  exempt-leak     judged exempt, served somewhere not exempt (the attack)

  path_corpus.py --host ADDR --source ADDR --port N [--port N...] --out FILE.jsonl

Writes the corpus and every result to --out (one JSON line each), prints a
summary JSON line, and exits 1 if any spelling disagreed or leaked.
"""
import argparse
import itertools
import json
import socket
import sys
import time

APPLIANCE_400 = b'{"error":{"code":"bad_request"}}'
# What each judgement must be served as.
SERVED_AS = {"exempt": "healthz", "v1": "v1", "per-client": "root"}  # per-client: the catch-all


def corpus():
    """The spellings, in a stable order, without duplicates."""
    out = []
    # Climbing out of a prefix with dot segments over every separator
    # spelling: /v1/b1%5c..%5c..%5chealthz and its kin.
    prefixes = {"/v1/b1": 2, "/x": 1}
    separators = ["/", "\\", "%5c", "%5C", "%2f", "%2F", "//"]
    dots = ["..", "%2e%2e", ".%2e", "..;", "%c0%ae%c0%ae", "%252e%252e"]
    targets = ["healthz", "v1/models", "other"]
    for (prefix, depth), sep, dot, target in itertools.product(prefixes.items(), separators, dots, targets):
        out.append(prefix + (sep + dot) * depth + sep + target)
        if sep != "/":
            # The first separator a real '/', the rest another spelling.
            out.append(prefix + "/" + dot + (sep + dot) * (depth - 1) + sep + target)
    # The targets themselves, encoded and decorated.
    for target in ["/healthz", "/v1/models", "/other"]:
        name = target[1:]
        out += [
            target, target + "/", target + ".", target + "/.", target + "/..", target + "//", "/" + target,
            "/./" + name, "/%2e/" + name, "\\" + name, "%5c" + name, target + ";", target + ";x=1",
            target + "%00", target + "%00.json", target + "%0a", target + "%7f", target + "%zz", target + "%4",
            target + "%", target + "%2e", target + "%2ejson", target + "%20", target + "%3F", target + "%23",
            target + "%25", target + "%C3%A9", target + "%C0%AF", target + "%E0%80%AF", target + "%FF",
            target + "%C3", target + "?q=..%5c..%5c", target + "?q=/../", "/%" + "%02x" % ord(name[0]) + name[1:],
            "/%" + "%02X" % ord(name[0]) + name[1:], target.upper(), target.replace("/", "%2f"),
            target.replace("/", "%5c"), "/" + name[:1] + "%" + "%02x" % ord(name[1]) + name[2:],
        ]
    # The attack spellings, as reported.
    out += ["/v1/b1%5c..%5c..%5chealthz", "/v1/b1%5C..%5C..%5Chealthz", "/v1/b1\\..\\..\\healthz",
            "/v1/b1/..%5c..%5chealthz", "/v1/%2e%2e%5chealthz", "/v1/..;/healthz", "/v1/%2e%2e/healthz",
            "/v1/../healthz", "/v1/%c0%ae%c0%ae/healthz", "/v1/%C0%AF../healthz", "/v1/...", "/v1/.well-known/x",
            "/v1/b1/..", "/v1/", "/v1", "/v10/x", "/"]
    seen = set()
    return [p for p in out if not (p in seen or seen.add(p))]


def exchange(host, source, port, path, timeout):
    req = ("GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: path-corpus\r\nConnection: close\r\n\r\n" % (path, host)).encode(
        "latin-1")
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(timeout)
    data = b""
    try:
        s.bind((source, 0))
        s.connect((host, port))
        s.sendall(req)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    except OSError as e:
        return None, {}, b"", str(e) if not data else None
    finally:
        s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    try:
        status = int(lines[0].split(" ")[1])
    except (IndexError, ValueError):
        return None, {}, body, "no status line: %r" % data[:80]
    fields = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        fields[k.strip().lower()] = v.strip()
    return status, fields, body, None


def judge(status, fields, body):
    """(outcome, sluice's judgement, the origin's location)."""
    loc = fields.get("x-loc")
    if loc is None:
        if status == 400 and body.strip() == APPLIANCE_400:
            return "refused", "refused", None
        return "origin-refused", None, None
    policy = fields.get("ratelimit-policy")
    if policy is None:
        judged = "exempt"
    else:
        judged = policy.split(";")[0].strip('"')
    if judged == "exempt" and loc != "healthz":
        return "exempt-leak", judged, loc
    return ("agreed" if SERVED_AS.get(judged) == loc else "disagreed"), judged, loc


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--port", type=int, action="append", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--timeout", type=float, default=5.0)
    ap.add_argument("--max", type=int, default=1200, help="at most this many spellings (a bound on the run)")
    a = ap.parse_args()
    paths = corpus()[: a.max]
    counts = {}
    bad = []
    started = time.monotonic()
    with open(a.out, "w") as out:
        for path in paths:
            for port in a.port:
                status, fields, body, error = exchange(a.host, a.source, port, path, a.timeout)
                if error:
                    outcome, judged, loc = "error", None, None
                else:
                    outcome, judged, loc = judge(status, fields, body)
                key = "%d:%s" % (port, outcome)
                counts[key] = counts.get(key, 0) + 1
                rec = {"path": path, "port": port, "status": status, "outcome": outcome, "judged": judged,
                       "served": loc, "policy": fields.get("ratelimit-policy"), "error": error}
                out.write(json.dumps(rec) + "\n")
                if outcome in ("disagreed", "exempt-leak", "error"):
                    bad.append(rec)
    summary = {"summary": True, "spellings": len(paths), "counts": counts, "bad": bad[:40], "bad_total": len(bad),
               "elapsed": round(time.monotonic() - started, 2)}
    print(json.dumps(summary))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
