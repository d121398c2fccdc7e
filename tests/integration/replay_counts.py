#!/usr/bin/python3
"""Compares what the live appliance decided with what sluice-replay decided
on a capture of the same traffic.

  replay_counts.py BEFORE.json AFTER.json REPLAY.json

BEFORE and AFTER are `sluicectl --json stats` around the traffic; REPLAY is
`sluice-replay --json`. Per rule of the policy, the live deltas of admitted,
refused and answered must equal the replay's row for that rule, and the
totals (forwarded, exempt, admitted, refused, answered, and the heads the
parser refused: sluiced's parse_errors, the replay's unparsed) must be equal too.
Prints one line per figure compared; exits 1 listing every difference.
"""
import json
import sys


def load(path):
    with open(path) as f:
        return json.load(f)


def main():
    before, after, replay = (load(p) for p in sys.argv[1:4])
    policy = replay["policy"]
    rows = {r["rule"]: r for r in policy["rules"]}
    wrong = []
    compared = 0

    def compare(what, live, replayed):
        nonlocal compared
        compared += 1
        print("%-40s live %6d  replay %6d" % (what, live, replayed))
        if live != replayed:
            wrong.append("%s: live %d, replay %d" % (what, live, replayed))

    live_before = {r["name"]: r for r in before["rules"]}
    for rule in after["rules"]:
        name = rule["name"]
        old = live_before.get(name, {})
        for verdict in ("admitted", "refused", "answered"):
            live = int(rule[verdict]) - int(old.get(verdict, 0))
            compare("rule %s %s" % (name, verdict), live, int(rows.get(name, {}).get(verdict, 0)))
    for total in ("forwarded", "exempt", "admitted", "refused", "answered"):
        live = int(after["counters"][total]) - int(before["counters"][total])
        compare("total %s" % total, live, int(policy[total]))
    compare("total unparsed (live parse_errors)",
            int(after["counters"]["parse_errors"]) - int(before["counters"]["parse_errors"]), int(policy["unparsed"]))
    if wrong:
        print("DIFFERENT: " + "; ".join(wrong))
        return 1
    print("EQUAL: %d figures" % compared)
    return 0


if __name__ == "__main__":
    sys.exit(main())
