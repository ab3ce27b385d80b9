#!/usr/bin/env python3
"""PyMySQL sessions under load through `serve --takeover` hand-offs.

    integration/.venv/bin/python integration/drivers/takeover/pymysql_load.py \
        --port 6033 --sessions 22 --seconds 300 --stop /tmp/stop --tag tkl-123-py --shards 14,3000 --out py.json

Each session (a thread with its own connection, autocommit on) sets a user
variable (`@client`), two session variables (`time_zone`, `sql_mode`) and a
current database (`USE dbNNNNN`, its shard), reads them back once, then loops
until --seconds: INSERT a row (every third one inside BEGIN ... COMMIT, with a
read of the row in the transaction), a point read of the row by its 64-bit ID,
and `SELECT @client, @@session.time_zone, @@session.sql_mode, DATABASE(),
CONNECTION_ID()`, which must answer what the session set (a changed
CONNECTION_ID() is a reconnect). PyMySQL has no server-side prepared
statements (it interpolates parameters client-side), so its sessions check
no prepared statement; mysql2 and sysbench do.

Every failed statement is counted (the first ones kept); a connection that
fails is opened again and counted as a reconnect. The JSON report (--out)
has the counts, the longest statement, the statements of 50 ms or more
(start, ms), and every acknowledged insert
(`[shard, id, data]`) for takeover_check.py.
"""

import argparse
import json
import os
import threading
import time

import pymysql

SQL_MODE = "STRICT_ALL_TABLES,NO_ZERO_DATE"
TIME_ZONE = "+03:00"
# Statements at least this long are listed (start, ms) for the verdict to
# tell stalls during a hand-off from the others.
SLOW = 0.05


class Session:
    def __init__(self, args, index, shard):
        self.args = args
        self.index = index
        self.shard = shard
        self.name = "%s-s%d" % (args.tag, index)
        self.db = "db%05d" % shard
        self.statements = 0
        self.errors = 0
        self.error_samples = []
        self.reconnects = 0
        self.state_failures = 0
        self.state_samples = []
        self.longest = 0.0
        self.longest_at = 0.0
        self.slow = []
        self.acked = []
        self.conn = None
        self.expected = None

    def error(self, what, exc):
        self.errors += 1
        if len(self.error_samples) < 5:
            self.error_samples.append("%s: %s: %r" % (self.name, what, exc))

    def state_failure(self, text):
        self.state_failures += 1
        if len(self.state_samples) < 5:
            self.state_samples.append("%s: %s" % (self.name, text))

    def run(self, cursor, sql, args=None):
        started = time.monotonic()
        try:
            cursor.execute(sql, args)
            return cursor.fetchall()
        finally:
            took = time.monotonic() - started
            self.statements += 1
            if took > self.longest:
                self.longest, self.longest_at = took, time.time()
            if took >= SLOW and len(self.slow) < 1000:
                self.slow.append([round(time.time() - took, 3), round(took * 1000, 1)])

    def open(self):
        self.conn = pymysql.connect(host=self.args.host, port=self.args.port, user=self.args.user,
                                    password=self.args.password, charset="utf8mb4", autocommit=True,
                                    connect_timeout=10, read_timeout=60, write_timeout=60)
        c = self.conn.cursor()
        self.run(c, "USE " + self.db)
        self.run(c, "SET @client = %s", (self.name,))
        self.run(c, "SET SESSION time_zone = %s", (TIME_ZONE,))
        self.run(c, "SET SESSION sql_mode = %s", (SQL_MODE,))
        row = self.run(c, "SELECT @client, @@session.time_zone, @@session.sql_mode, DATABASE(), CONNECTION_ID()")[0]
        got = tuple(str(v) for v in row)
        if self.expected is None:
            if got[:4] != (self.name, TIME_ZONE, SQL_MODE, self.db):
                self.state_failure("after setting it up: %r" % (got,))
            self.expected = got
        else:
            # A new connection (the caller counted the reconnect): its own id.
            self.expected = self.expected[:4] + (got[4],)

    def check_state(self, c):
        row = self.run(c, "SELECT @client, @@session.time_zone, @@session.sql_mode, DATABASE(), CONNECTION_ID()")
        got = tuple(str(v) for v in row[0]) if len(row) == 1 else None
        if got != self.expected:
            if got is not None and got[4] != self.expected[4]:
                self.reconnects += 1
            self.state_failure("state %r, expected %r" % (got, self.expected))
            if got is not None:
                # Count a changed connection once.
                self.expected = self.expected[:4] + (got[4],)

    def step(self, n):
        c = self.conn.cursor()
        data = "%s-%d" % (self.name, n)
        if n % 3 == 0:
            self.run(c, "BEGIN")
            self.run(c, "INSERT INTO pins (data) VALUES (%s)", (data,))
            gid = c.lastrowid
            rows = self.run(c, "SELECT data FROM pins WHERE id = %s", (gid,))
            if [r[0] for r in rows] != [data]:
                self.state_failure("in the transaction, id %d reads %r, not %r" % (gid, rows, data))
            self.run(c, "COMMIT")
        else:
            self.run(c, "INSERT INTO pins (data) VALUES (%s)", (data,))
            gid = c.lastrowid
        self.acked.append([self.shard, gid, data])
        rows = self.run(c, "SELECT data FROM pins WHERE id = %s", (gid,))
        if [r[0] for r in rows] != [data]:
            self.state_failure("id %d reads %r, not %r" % (gid, rows, data))
        self.check_state(c)

    def main(self, deadline, stop):
        try:
            self.open()
        except Exception as exc:  # noqa: BLE001 - every failure is counted
            self.error("connect", exc)
            return
        n = 0
        while time.monotonic() < deadline and not os.path.exists(stop):
            n += 1
            try:
                self.step(n)
            except Exception as exc:  # noqa: BLE001
                self.error("statement %d" % n, exc)
                try:
                    # Never leave a transaction open (it would hold the session in the old process).
                    self.conn.rollback()
                except Exception:  # noqa: BLE001
                    pass
                if not self.conn.open:
                    self.reconnects += 1
                    try:
                        self.open()
                    except Exception as exc2:  # noqa: BLE001
                        self.error("reconnect", exc2)
                        time.sleep(0.2)
        try:
            self.conn.close()
        except Exception:  # noqa: BLE001
            pass


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--user", default="app")
    ap.add_argument("--password", default="app")
    ap.add_argument("--sessions", type=int, required=True)
    ap.add_argument("--seconds", type=float, required=True, help="longest run")
    ap.add_argument("--stop", required=True, help="the sessions end once this file exists")
    ap.add_argument("--tag", required=True)
    ap.add_argument("--shards", required=True, help="comma-separated shards; session i uses shard i mod count")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    shards = [int(s) for s in args.shards.split(",")]
    sessions = [Session(args, i, shards[i % len(shards)]) for i in range(args.sessions)]
    deadline = time.monotonic() + args.seconds
    threads = [threading.Thread(target=s.main, args=(deadline, args.stop)) for s in sessions]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    longest = max(sessions, key=lambda s: s.longest)
    report = {
        "driver": "PyMySQL %s" % pymysql.VERSION_STRING,
        "sessions": len(sessions),
        "statements": sum(s.statements for s in sessions),
        "errors": sum(s.errors for s in sessions),
        "reconnects": sum(s.reconnects for s in sessions),
        "state_failures": sum(s.state_failures for s in sessions),
        "prepared_checked": False,
        "longest_ms": round(longest.longest * 1000, 1),
        "longest_at": longest.longest_at,
        "slow": sum((s.slow for s in sessions), []),
        "samples": sum((s.error_samples + s.state_samples for s in sessions), [])[:20],
        "acked": sum((s.acked for s in sessions), []),
    }
    with open(args.out, "w") as f:
        json.dump(report, f)


if __name__ == "__main__":
    main()
