#!/usr/bin/python3
"""Reads http_client.py's JSON lines for the shell tests.

  results.py statuses FILE            "200x60 429." per connection, " | " between
                                      connections ("." = the peer closed after it)
  results.py count FILE STATUS        responses with that status
  results.py header FILE N NAME       header NAME of the Nth response (1-based over
                                      all connections; "last" for the last), empty if absent
  results.py has-header FILE N NAME   "yes" or "no"
  results.py body FILE N              the Nth response's body (as printed, truncated)
  results.py closed FILE N            "yes" if the peer closed after the Nth response
  results.py summary FILE KEY         a summary field (elapsed, answered, ...)
  results.py end FILE CONN KEY        a connection's end field (peer_closed, mss, ...)
  results.py remaining FILE START     checks RateLimit-Remaining on the 2xx responses
                                      counts down START, START-1, ...; prints what is wrong
  results.py expr FILE PYEXPR         evaluates PYEXPR with R (responses), E (ends), S (summary)
"""

import json
import sys


def load(path):
    R, E, S = [], [], {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            o = json.loads(line)
            if o.get("summary"):
                S = o
            elif o.get("event") == "end":
                E.append(o)
            else:
                R.append(o)
    return R, E, S


def nth(R, n):
    if not R:
        return None
    if n == "last":
        return R[-1]
    k = int(n)
    return R[k - 1] if 1 <= k <= len(R) else None


def statuses(R, E):
    out = []
    for e in E:
        rs = [r for r in R if r["conn"] == e["conn"]]
        parts = []
        for r in rs:
            tok = str(r["status"])
            if parts and parts[-1][0] == tok and not parts[-1][2]:
                parts[-1][1] += 1
            else:
                parts.append([tok, 1, False])
            if r.get("closed"):
                parts[-1][2] = True
        words = []
        for tok, k, closed in parts:
            words.append(("%sx%d" % (tok, k) if k > 1 else tok) + ("." if closed else ""))
        if e.get("error_kind") in ("gone", "timeout", "protocol", "connect"):
            words.append("!" + e["error_kind"])
        out.append(" ".join(words) if words else "-")
    return " | ".join(out)


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    cmd, path = sys.argv[1], sys.argv[2]
    a = sys.argv[3:]
    R, E, S = load(path)
    if cmd == "statuses":
        print(statuses(R, E))
    elif cmd == "count":
        print(sum(1 for r in R if str(r["status"]) == a[0]))
    elif cmd in ("header", "has-header"):
        r = nth(R, a[0])
        v = None if r is None else r["headers"].get(a[1].lower())
        print(("yes" if v is not None else "no") if cmd == "has-header" else (v or ""))
    elif cmd == "body":
        r = nth(R, a[0])
        sys.stdout.write("" if r is None else r["body"])
    elif cmd == "closed":
        r = nth(R, a[0])
        print("yes" if r is not None and r.get("closed") else "no")
    elif cmd == "summary":
        v = S.get(a[0])
        print(json.dumps(v) if isinstance(v, (dict, list)) else v)
    elif cmd == "end":
        e = next((e for e in E if str(e["conn"]) == a[0]), {})
        v = e.get(a[1])
        print(json.dumps(v) if isinstance(v, (dict, list)) else v)
    elif cmd == "remaining":
        want = int(a[0])
        problems = []
        for r in R:
            if not 200 <= r["status"] < 300:
                continue
            got = r["headers"].get("ratelimit-remaining")
            if got != str(want):
                problems.append("response %d of conn %d: RateLimit-Remaining %r, want %d" % (r["i"], r["conn"], got, want))
                if len(problems) >= 3:
                    break
            want -= 1
        print("; ".join(problems))
    elif cmd == "expr":
        print(eval(a[0], {"R": R, "E": E, "S": S, "json": json}))
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
