#!/usr/bin/env python3
"""mysql-connector-python through shardgate: the checks of harness.py, four ways.

    integration/.venv/bin/python integration/drivers/python/connector_conformance.py \
        --port 6033 [--master-a 3307 --master-b 3308 --mod-host 3310]

Runs every check with
  connector-c               the C extension (libmysqlclient; the default), text cursors
  connector-c-prepared      the C extension, cursor(prepared=True): server-side prepared statements
  connector-pure            the pure-Python protocol (use_pure=True), text cursors
  connector-pure-prepared   pure Python, cursor(prepared=True): COM_STMT_PREPARE/RESET/EXECUTE/CLOSE
plus the driver's own session commands (COM_RESET_CONNECTION, COM_CHANGE_USER,
COM_INIT_DB) and its automatic SHOW WARNINGS (get_warnings=True).
The connector starts with autocommit off. Exits 0 when every check passed.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import mysql.connector  # noqa: E402

import harness  # noqa: E402
from harness import as_text, expect, expect_eq, Session  # noqa: E402


class Connector(harness.Driver):
    def __init__(self, pure, prepared):
        self.pure = pure
        self.prepared = prepared
        self.name = "connector-" + ("pure" if pure else "c") + ("-prepared" if prepared else "")

    def connect(self, host, port, user, password, database=None, autocommit=None, **extra):
        kwargs = dict(host=host, port=port, user=user, password=password, charset="utf8mb4",
                      use_pure=self.pure, connection_timeout=60)
        if database is not None:
            kwargs["database"] = database
        if autocommit is not None:
            kwargs["autocommit"] = autocommit
        kwargs.update(extra)
        conn = mysql.connector.connect(**kwargs)
        want = "MySQLConnection" if self.pure else "CMySQLConnection"
        if type(conn).__name__ != want:
            raise RuntimeError(f"{self.name}: got a {type(conn).__name__}, not a {want} "
                               f"(is the C extension installed? mysql.connector.HAVE_CEXT="
                               f"{mysql.connector.HAVE_CEXT})")
        return conn

    def cursor(self, conn):
        return conn.cursor(prepared=True) if self.prepared else conn.cursor()

    def sql(self, text):
        # Prepared cursors take %s (converted to ?) as well; send ? ourselves.
        return text.replace("%s", "?") if self.prepared else text

    def begin(self, conn):
        conn.start_transaction()

    def select_db(self, conn, name):
        conn.cmd_init_db(name)

    def warning_count(self, cur, conn):
        if self.prepared and not self.pure:
            # CMySQLCursorPrepared does not record the count of a result set's
            # final packet (seen against MariaDB directly too); the connection
            # has it (mysql_warning_count()).
            return conn.warning_count
        return cur.warning_count

    def error_code(self, exc):
        return exc.errno

    def error_message(self, exc):
        return exc.msg

    def is_server_error(self, exc):
        return isinstance(exc, mysql.connector.Error) and exc.errno is not None and 1000 <= exc.errno < 2000

    def extra_checks(self):
        checks = [("driver_fetches_warnings", check_driver_fetches_warnings)]
        if not self.prepared:
            checks += [("reset_connection", check_reset_connection), ("change_user", check_change_user)]
        return checks


def check_driver_fetches_warnings(env, drv):
    """get_warnings=True: after a statement with warnings the connector sends
    SHOW WARNINGS itself and fills cursor.warnings."""
    # Calibrate: does this cursor kind fill .warnings against MariaDB itself?
    d = drv.connect(env.backend_host, env.master_a, env.backend_user, env.backend_password,
                    autocommit=True, get_warnings=True)
    try:
        cur = drv.cursor(d)
        cur.execute(drv.sql("SELECT 1/0 AS z"))
        cur.fetchall()
        direct_fills = bool(cur.warnings)
        cur.close()
    finally:
        d.close()
    if not direct_fills:
        print(f"    note: {drv.name} does not fill cursor.warnings even against MariaDB directly; "
              f"only the count is checked", flush=True)
    s = Session(env, drv, autocommit=True, get_warnings=True)
    try:
        shard = env.shard_on_b()
        gid = s.insert("pins", shard, "warned")
        cur = s.run("SELECT id, 1/0 AS z FROM pins WHERE id = %s", [gid])
        rows = cur.fetchall()
        expect_eq(len(rows), 1, "rows of the sharded SELECT with 1/0")
        expect_eq(drv.warning_count(cur, s.conn), 1, "warning count")
        if direct_fills:
            got = [(as_text(w[0]), int(w[1])) for w in (cur.warnings or [])]
            expect(("Warning", harness.WARN_DIV_ZERO) in got,
                   f"cursor.warnings (the driver's own SHOW WARNINGS) after a sharded SELECT 1/0: {cur.warnings!r}")
        cur.close()
    finally:
        s.close()


def check_reset_connection(env, drv):
    """COM_RESET_CONNECTION really resets the session, on the shards too."""
    s = Session(env, drv, autocommit=True)
    try:
        shard = env.shard_on_a()
        gid = s.insert("pins", shard, "reset")
        s.run_text("SET @reset_marker = 'before'")
        s.run_text("SET time_zone = '+03:00'")
        got = s.one("SELECT id, @reset_marker, @@session.time_zone FROM pins WHERE id = %s", [gid])
        expect_eq((as_text(got[1]), as_text(got[2])), ("before", "+03:00"), "settings before the reset")
        ok = s.conn.cmd_reset_connection()
        expect(ok is True, "cmd_reset_connection() returned False: the proxy refused COM_RESET_CONNECTION "
                           "(the connector swallows the error; with reset_session() it would fall back to "
                           "COM_CHANGE_USER)")
        got = s.one("SELECT @reset_marker, @@session.time_zone")
        expect_eq((got[0], as_text(got[1])), (None, "SYSTEM"), "user variable and time_zone after the reset")
        got = s.one("SELECT id, @reset_marker, @@session.time_zone FROM pins WHERE id = %s", [gid])
        expect_eq((got[1], as_text(got[2])), (None, "SYSTEM"),
                  f"user variable and time_zone on the backend serving shard {shard} after the reset")
    finally:
        s.close()


def check_change_user(env, drv):
    """COM_CHANGE_USER with a real password check."""
    s = Session(env, drv, autocommit=True)
    try:
        s.run_text("SET @cu_marker = 'before'")
        s.conn.cmd_change_user(username=env.user, password=env.password)
        expect_eq(s.one("SELECT @cu_marker")[0], None, "user variable after COM_CHANGE_USER")
        expect_eq(s.one("SELECT 1")[0], 1, "SELECT 1 after COM_CHANGE_USER")
        gid = s.insert("pins", env.shard_on_b(), "after-change-user")
        expect(gid > 0, "an insert after COM_CHANGE_USER")
    finally:
        s.close()
    s = Session(env, drv, autocommit=True)
    try:
        try:
            s.conn.cmd_change_user(username=env.user, password=env.password + "-wrong")
        except mysql.connector.Error as exc:
            expect_eq(exc.errno, 1045, f"COM_CHANGE_USER with a wrong password: error code (message {exc.msg!r})")
        else:
            raise harness.CheckFailed("COM_CHANGE_USER with a wrong password was accepted")
    finally:
        s.close()


if __name__ == "__main__":
    harness.main([Connector(pure=False, prepared=False), Connector(pure=False, prepared=True),
                  Connector(pure=True, prepared=False), Connector(pure=True, prepared=True)],
                 __doc__.splitlines()[0])
