#!/usr/bin/python3
"""mysqlclient (MySQLdb, C over libmariadb) through shardgate: the checks of harness.py.

    /usr/bin/python3 integration/drivers/python/mysqlclient_conformance.py \
        --port 6033 [--master-a 3307 --master-b 3308 --mod-host 3310]

Debian's python3-mysqldb, run with Debian's /usr/bin/python3 (not the
virtualenv). mysqlclient interpolates parameters client-side (text
protocol) and starts every connection with autocommit off
(mysql_autocommit(0) at connect); its own checks cover that default,
commit() / rollback() seen from a second connection and on the host, and
autocommit(True). Exits 0 when every check passed.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import MySQLdb  # noqa: E402

import harness  # noqa: E402
from harness import expect_eq, marker, stored_data, Session  # noqa: E402


class MySQLClient(harness.Driver):
    name = "mysqlclient"

    def connect(self, host, port, user, password, database=None, autocommit=None, **extra):
        kwargs = dict(host=host, port=port, user=user, passwd=password, charset="utf8mb4",
                      connect_timeout=10, read_timeout=60, write_timeout=60)
        if database is not None:
            kwargs["db"] = database
        if autocommit is not None:
            kwargs["autocommit"] = autocommit
        kwargs.update(extra)
        return MySQLdb.connect(**kwargs)

    def begin(self, conn):
        conn.query(b"BEGIN")

    def warning_count(self, cur, conn):
        return conn.warning_count()

    def show_warnings(self, conn):
        return [(harness.as_text(r[0]), int(r[1]), harness.as_text(r[2])) for r in conn.show_warnings()]

    def error_code(self, exc):
        return exc.args[0]

    def error_message(self, exc):
        return exc.args[1] if len(exc.args) > 1 else str(exc)

    def is_server_error(self, exc):
        return isinstance(exc, MySQLdb.MySQLError) and len(exc.args) >= 2 and isinstance(exc.args[0], int) \
            and 1000 <= exc.args[0] < 2000

    def extra_checks(self):
        return [("autocommit_default_commit_rollback", check_autocommit_default_commit_rollback)]


def visible(other, gid):
    """Whether a second proxy session (autocommit on) reads row gid."""
    return len(other.rows("SELECT id FROM pins WHERE id = %s", [gid])) == 1


def check_autocommit_default_commit_rollback(env, drv):
    """mysqlclient's default is autocommit off: writes are seen by others only
    after commit(), rollback() discards them, autocommit(True) commits each
    write at once."""
    s = Session(env, drv)
    other = Session(env, drv, autocommit=True)
    try:
        expect_eq(s.conn.get_autocommit(), False, "get_autocommit() right after connecting (server status flag)")
        shard = env.shard_on_a()
        data = marker(env, "mysqlclient-commit")
        gid = s.insert("pins", shard, data)
        expect_eq(s.conn.get_autocommit(), False, "get_autocommit() after an INSERT with autocommit off")
        expect_eq(visible(other, gid), False, "another connection sees the insert before commit()")
        expect_eq(stored_data(env, drv, "pins", gid), None, "the uncommitted row on its host (another session)")
        s.commit()
        expect_eq(visible(other, gid), True, "another connection sees the insert after commit()")
        expect_eq(stored_data(env, drv, "pins", gid), data, "the committed row on its host")
        expect_eq(s.conn.get_autocommit(), False,
                  "get_autocommit() after commit() (autocommit(True) sends nothing when the flag says on)")

        shard = env.shard_on_b()
        gid = s.insert("pins", shard, marker(env, "mysqlclient-rollback"))
        s.rollback()
        expect_eq(visible(other, gid), False, "another connection sees a rolled back insert")
        expect_eq(stored_data(env, drv, "pins", gid), None, "a rolled back row on its host")

        s.conn.autocommit(True)
        expect_eq(s.conn.get_autocommit(), True, "get_autocommit() after autocommit(True)")
        for shard in (env.shard_on_a(), env.shard_on_b()):
            data = marker(env, f"mysqlclient-autocommit-{shard}")
            gid = s.insert("pins", shard, data)
            expect_eq(visible(other, gid), True, f"another connection sees an autocommit insert into shard {shard}")
            expect_eq(stored_data(env, drv, "pins", gid), data, f"the autocommit row on its host (shard {shard})")
        s.conn.autocommit(False)
        expect_eq(s.conn.get_autocommit(), False, "get_autocommit() after autocommit(False)")
        expect_eq(int(s.one("SELECT @@autocommit")[0]), 0, "SELECT @@autocommit after autocommit(False)")
        gid = s.insert("pins", env.shard_on_a(), marker(env, "mysqlclient-off-again"))
        expect_eq(visible(other, gid), False, "an insert after autocommit(False) before commit()")
        s.rollback()
        expect_eq(stored_data(env, drv, "pins", gid), None, "rolled back after autocommit(False)")
    finally:
        s.close()
        other.close()


if __name__ == "__main__":
    harness.main([MySQLClient()], __doc__.splitlines()[0])
