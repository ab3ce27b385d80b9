#!/usr/bin/env python3
"""The verdict of integration/bench/takeover.sh: the clients' reports, the
hand-offs, and the run's rows on the masters, read directly.

    integration/.venv/bin/python integration/drivers/takeover/takeover_check.py --run RUN \
        --handoffs WORK/handoffs.tsv --sessions 64 [--delete] [--report FILE] REPORT.json ...

Every acknowledged insert (`[shard, id, data]` in a client's report) must be
on its shard's master (`dbNNNNN.pins`, 3307 for shards 0-2047, 3308 after)
exactly once, with the local id its 64-bit ID names and the ID's shard the
session's; a row of the run (data `RUN-...`) that no client acknowledged is
counted as unacknowledged. Fails (exit 1) on any failed statement, reconnect,
failed state check, missing / duplicated / unacknowledged row, a takeover
whose old process did not exit 0 or closed or cut a session, a takeover
that handed fewer sessions than --sessions, or a missing report. Prints the
figures as markdown (also to --report) and a last line
`takeover-load: ok|FAILED ...` with the counts.
"""

import argparse
import collections
import json
import sys

import pymysql

SHARD_SHIFT = 46
LOCAL_MASK = (1 << 36) - 1
MASTER_A_LAST = 2047


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--run", required=True)
    ap.add_argument("--handoffs", required=True)
    ap.add_argument("--sessions", type=int, required=True)
    ap.add_argument("--master-a", type=int, default=3307)
    ap.add_argument("--master-b", type=int, default=3308)
    ap.add_argument("--user", default="shard")
    ap.add_argument("--password", default="shardpw")
    ap.add_argument("--delete", action="store_true", help="delete the run's rows after checking")
    ap.add_argument("--report")
    ap.add_argument("--machine", default="")
    ap.add_argument("--revision", default="")
    ap.add_argument("--command", default="")
    ap.add_argument("reports", nargs="+")
    args = ap.parse_args()

    problems = []
    drivers = collections.OrderedDict()
    acked = []
    for path in args.reports:
        try:
            with open(path) as f:
                r = json.load(f)
        except (OSError, ValueError) as exc:
            problems.append("report %s: %s" % (path, exc))
            continue
        d = drivers.setdefault(r["driver"], dict(sessions=0, statements=0, errors=0, reconnects=0,
                                                 state_failures=0, longest_ms=0.0, inserts=0,
                                                 prepared=r["prepared_checked"], samples=[], slow=[]))
        for k in ("sessions", "statements", "errors", "reconnects", "state_failures"):
            d[k] += r[k]
        d["longest_ms"] = max(d["longest_ms"], r["longest_ms"])
        d["inserts"] += len(r["acked"])
        d["samples"] += r["samples"]
        d["slow"] += r.get("slow", [])
        acked += [(int(s), int(i), str(data)) for s, i, data in r["acked"]]

    # The masters, directly.
    shards = sorted({s for s, _, _ in acked})
    rows = collections.Counter()   # (shard, local_id, data) -> count
    by_data = collections.Counter()
    for port in (args.master_a, args.master_b):
        mine = [s for s in shards if (s <= MASTER_A_LAST) == (port == args.master_a)]
        if not mine:
            continue
        conn = pymysql.connect(host="127.0.0.1", port=port, user=args.user, password=args.password,
                               charset="utf8mb4", autocommit=True)
        with conn.cursor() as c:
            for s in mine:
                c.execute("SELECT local_id, data FROM db%05d.pins WHERE data LIKE %%s" % s, (args.run + "-%",))
                for local_id, data in c.fetchall():
                    rows[(s, int(local_id), data)] += 1
                    by_data[data] += 1
                if args.delete:
                    c.execute("DELETE FROM db%05d.pins WHERE data LIKE %%s" % s, (args.run + "-%",))
        conn.close()
    missing = duplicated = wrong_shard = 0
    acked_data = set()
    for s, gid, data in acked:
        acked_data.add(data)
        if gid >> SHARD_SHIFT != s:
            wrong_shard += 1
            problems.append("id %d of %s names shard %d, the session's is %d" % (gid, data, gid >> SHARD_SHIFT, s))
        n = rows.get((s, gid & LOCAL_MASK, data), 0)
        if n == 0:
            missing += 1
            if missing <= 5:
                problems.append("acknowledged insert %s (id %d) is not on shard %d's master" % (data, gid, s))
        elif n > 1 or by_data[data] > 1:
            duplicated += 1
            if duplicated <= 5:
                problems.append("acknowledged insert %s is there %d times" % (data, by_data[data]))
    unacked = sum(n for (_, _, data), n in rows.items() if data not in acked_data)
    if unacked:
        problems.append("%d rows of the run that no client acknowledged" % unacked)
    once = len(acked) - missing - duplicated - wrong_shard

    # The hand-offs.
    handoffs = []
    with open(args.handoffs) as f:
        for line in f:
            rnd, binary, rc, took, ftl, handed, closed, cut, began, ended = line.split("\t")
            handoffs.append(dict(round=int(rnd), binary=binary, rc=int(rc), took=int(took), ftl=int(ftl),
                                 handed=int(handed), closed=int(closed), cut=int(cut),
                                 began=float(began), ended=float(ended)))

    # The longest statement overlapping a hand-off (new process started to
    # old process gone) and the longest outside them, per driver (of those
    # of 50 ms or more the clients listed).
    def during(start, ms):
        return any(start <= h["ended"] and start + ms / 1000 >= h["began"] for h in handoffs)

    for d in drivers.values():
        d["longest_during"] = max((ms for start, ms in d["slow"] if during(start, ms)), default=0)
        d["longest_outside"] = max((ms for start, ms in d["slow"] if not during(start, ms)), default=0)
    for h in handoffs:
        if h["rc"] != 0 or h["closed"] or h["cut"] or h["handed"] < args.sessions:
            problems.append("takeover %d: old exit %d, handed %d of %d sessions, closed %d, cut %d"
                            % (h["round"], h["rc"], h["handed"], args.sessions, h["closed"], h["cut"]))

    totals = {k: sum(d[k] for d in drivers.values())
              for k in ("sessions", "statements", "errors", "reconnects", "state_failures")}
    for d in drivers.values():
        problems += d["samples"][:5]
    if totals["errors"]:
        problems.append("%d failed statements" % totals["errors"])
    if totals["reconnects"]:
        problems.append("%d reconnects" % totals["reconnects"])
    if totals["state_failures"]:
        problems.append("%d failed state checks" % totals["state_failures"])

    out = []
    out.append("Run %s: %d sessions, %d takeovers; %s" % (args.run, totals["sessions"], len(handoffs), args.revision))
    if args.machine:
        out.append("Machine: " + args.machine)
    if args.command:
        out.append("Command: `%s`" % args.command)
    out.append("")
    out.append("| driver | sessions | statements | failed | reconnects | state checks failed | prepared checked "
               "| inserts acknowledged | longest statement | longest during a hand-off | longest outside |")
    out.append("| --- | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: |")
    under = lambda ms: "%.0f ms" % ms if ms else "< 50 ms"  # noqa: E731
    for name, d in drivers.items():
        out.append("| %s | %d | %d | %d | %d | %d | %s | %d | %.0f ms | %s | %s |" % (
            name, d["sessions"], d["statements"], d["errors"], d["reconnects"], d["state_failures"],
            "yes" if d["prepared"] else "no (text protocol only)", d["inserts"], d["longest_ms"],
            under(d["longest_during"]), under(d["longest_outside"])))
    out.append("")
    out.append("Acknowledged inserts: %d; on their master exactly once: %d; missing %d; duplicated %d; "
               "wrong shard %d; unacknowledged rows of the run: %d" % (len(acked), once, missing, duplicated,
                                                                      wrong_shard, unacked))
    out.append("")
    out.append("| takeover | new binary | old exit | sessions handed | closed | cut | sessions first to last "
               "| listeners to last session | new process started to old gone |")
    out.append("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for h in handoffs:
        out.append("| %d | %s | %d | %d | %d | %d | %d ms | %d ms | %.0f ms |" % (
            h["round"], h["binary"], h["rc"], h["handed"], h["closed"], h["cut"], h["ftl"], h["took"],
            (h["ended"] - h["began"]) * 1000))
    if handoffs:
        ftl = sorted(h["ftl"] for h in handoffs)
        took = sorted(h["took"] for h in handoffs)
        out.append("")
        out.append("Sessions first to last: median %d ms, max %d ms; listeners to last session: median %d ms, max %d ms"
                   % (ftl[len(ftl) // 2], ftl[-1], took[len(took) // 2], took[-1]))
    if problems:
        out.append("")
        out.append("Problems:")
        out += ["- " + p for p in problems]
    text = "\n".join(out) + "\n"
    sys.stdout.write(text)
    if args.report:
        with open(args.report, "w") as f:
            f.write(text)
    longest = max((d["longest_ms"] for d in drivers.values()), default=0)
    print("takeover-load: %s sessions=%d takeovers=%d statements=%d failed=%d reconnects=%d state_failed=%d "
          "inserts=%d once=%d missing=%d duplicated=%d unacked=%d longest_ms=%.0f" % (
              "FAILED" if problems else "ok", totals["sessions"], len(handoffs), totals["statements"],
              totals["errors"], totals["reconnects"], totals["state_failures"], len(acked), once, missing,
              duplicated, unacked, longest))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
