#!/usr/bin/env python3
"""PyMySQL through shardgate: the conformance checks of harness.py.

    integration/.venv/bin/python integration/drivers/python/pymysql_conformance.py \
        --port 6033 [--master-a 3307 --master-b 3308 --mod-host 3310]

PyMySQL is pure Python, interpolates parameters client-side (text protocol)
and starts every connection with autocommit off (it sends SET AUTOCOMMIT = 0).
Exits 0 when every check passed.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import pymysql  # noqa: E402

import harness  # noqa: E402
from harness import expect, expect_eq, Session  # noqa: E402


class PyMySQL(harness.Driver):
    name = "pymysql"

    def connect(self, host, port, user, password, database=None, autocommit=None, **extra):
        kwargs = dict(host=host, port=port, user=user, password=password, database=database,
                      charset="utf8mb4", connect_timeout=10, read_timeout=60, write_timeout=60)
        if autocommit is not None:
            kwargs["autocommit"] = autocommit
        kwargs.update(extra)
        return pymysql.connect(**kwargs)

    def show_warnings(self, conn):
        # The driver's own API: Connection.show_warnings() sends SHOW WARNINGS.
        return [(harness.as_text(r[0]), int(r[1]), harness.as_text(r[2])) for r in conn.show_warnings()]

    def error_code(self, exc):
        return exc.args[0]

    def error_message(self, exc):
        return exc.args[1] if len(exc.args) > 1 else str(exc)

    def is_server_error(self, exc):
        return isinstance(exc, pymysql.err.MySQLError) and len(exc.args) >= 2 and isinstance(exc.args[0], int) \
            and exc.args[0] < 2000

    def extra_checks(self):
        return [("driver_defaults", check_driver_defaults)]


def check_driver_defaults(env, drv):
    """What PyMySQL does on its own: autocommit off at connect, ping."""
    s = Session(env, drv)
    try:
        expect_eq(s.conn.get_autocommit(), False, "PyMySQL's view of autocommit after connecting (server status)")
        s.conn.ping(reconnect=False)
        s.conn.autocommit(True)
        expect_eq(s.conn.get_autocommit(), True, "autocommit after conn.autocommit(True)")
        s.conn.autocommit(False)
        expect_eq(s.conn.get_autocommit(), False, "autocommit after conn.autocommit(False)")
        expect(s.conn.open, "connection still open")
    finally:
        s.close()


if __name__ == "__main__":
    harness.main([PyMySQL()], __doc__.splitlines()[0])
