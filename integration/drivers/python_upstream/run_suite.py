#!/usr/bin/env python3
"""Runs modules of MySQL Connector/Python's own test suite against one server
(or proxy) and writes each test's outcome as `go test -json` events, so
integration/drivers/go/compare_upstream.py compares two runs.

    run_suite.py --src DIR --host H --port P --user U --password PW --database DB
        --json OUT [--only REGEX] MODULE...

--src is the unpacked sdist (its tests/ package and tests/data); the driver
under test is the one installed in this interpreter (its pure-Python
connection and its C extension), which must be the sdist's version. This
replaces the sdist's unittests.py, whose --use-external-server mode drops and
creates the database `myconnpy`: the proxy routes shard databases only, so
the tests get --database instead. A MODULE is a name under tests/
(test_cursor). A test's name is module.Class.method.
"""

import argparse
import asyncio
import io
import json
import logging
import os
import re
import signal
import sys
import time
import traceback
import unittest
import warnings


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--src", required=True)
    p.add_argument("--host", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--user", required=True)
    p.add_argument("--password", required=True)
    p.add_argument("--database", required=True)
    p.add_argument("--json", required=True, help="file for the go test -json events")
    p.add_argument("--only", default=None, help="run only tests whose name matches this regex")
    p.add_argument("--test-timeout", type=int, default=20,
                   help="seconds after which a test fails as hung (its longest wait is a 15 s SLEEP)")
    p.add_argument("modules", nargs="+")
    return p.parse_args()


def configure(tests, mysqld, args):
    """What unittests.py --use-external-server sets up, for --database."""
    import mysql.connector

    server = mysqld.MySQLExternalServer("", "server1")
    server.client_config = {
        "host": args.host,
        "port": args.port,
        "user": args.user,
        "password": args.password,
        "database": args.database,
        "connection_timeout": 60,
        "unix_socket": None,
    }
    server.xplugin_config = dict(server.client_config, schema=args.database)
    with mysql.connector.connect(**server.client_config) as cnx, cnx.cursor() as cur:
        cur.execute("SELECT VERSION()")
        version = cur.fetchone()[0]
        cur.execute("SHOW VARIABLES LIKE 'license'")
        row = cur.fetchone()
        server.license = row[1] if row else "GPL"
    match = re.match(r"^(\d+)\.(\d+)\.(\d+)", version, re.ASCII)
    if not match:
        raise SystemExit(f"run_suite: unexpected server version {version!r}")
    server.version = tuple(int(g) for g in match.groups())
    tests.OPTIONS_INIT = True
    tests.MYSQL_SERVERS.append(server)
    tests.MYSQL_EXTERNAL_SERVER = True
    tests.MYSQL_VERSION = server.version
    tests.MYSQL_LICENSE = server.license
    tests.MYSQL_VERSION_TXT = ".".join(map(str, server.version))
    tests.IPV6_AVAILABLE = False
    return version


class TestTimeout(Exception):
    """A test ran longer than --test-timeout (e.g. waits forever for a reply)."""


def on_alarm(_signum, _frame):
    raise TestTimeout("the test hung: no result within --test-timeout seconds")


def close_leftover_connections(test):
    """Closes the connections a finished test object still holds. A test whose
    tearDown failed leaves them open, and a transaction open on one holds its
    tables' metadata locks: the next test's DROP TABLE would wait for them
    (lock_wait_timeout is a day), on a server as through the proxy."""
    for value in list(vars(test).values()):
        close = getattr(value, "close", None)
        if callable(close) and hasattr(value, "is_connected") and not asyncio.iscoroutinefunction(close):
            try:
                close()
            except Exception:  # already closed or broken: nothing left to release
                pass


class JsonResult(unittest.TestResult):
    """Writes run/output/pass/fail/skip events per test, as test2json does;
    fails a test that runs longer than `timeout` seconds."""

    def __init__(self, out, name_of, timeout):
        super().__init__()
        self.timeout = timeout
        self.out = out
        self.name_of = name_of
        self.names = {}
        self.started = {}
        self.counts = {"pass": 0, "fail": 0, "skip": 0}

    def _event(self, action, name, **extra):
        self.out.write(json.dumps(dict(Action=action, Test=name, **extra)) + "\n")
        self.out.flush()

    def startTest(self, test):
        super().startTest(test)
        # foreach_cnx renames _testMethodName while a test runs: keep the first name.
        name = self.name_of(test)
        self.names[id(test)] = name
        self.started[id(test)] = time.monotonic()
        self._event("run", name)
        signal.alarm(self.timeout)

    def _end(self, test, action, text=""):
        name = self.names.get(id(test)) or self.name_of(test)
        if text:
            self._event("output", name, Output=text)
        elapsed = time.monotonic() - self.started.get(id(test), time.monotonic())
        self._event(action, name, Elapsed=round(elapsed, 3))
        self.counts[action] += 1

    def addSuccess(self, test):
        super().addSuccess(test)
        self._end(test, "pass")

    def addError(self, test, err):
        super().addError(test, err)
        self._end(test, "fail", self._exc_info_to_string(err, test))

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._end(test, "fail", self._exc_info_to_string(err, test))

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._end(test, "skip", f"skipped: {reason}\n")

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._end(test, "pass")

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._end(test, "fail", "unexpected success\n")

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is not None:
            # The parent's outcome is decided by stopTest (a failed subtest fails it).
            self.names.setdefault(id(test), self.name_of(test))
            self._event("output", self.names[id(test)], Output=self._exc_info_to_string(err, test))
            self.subtest_failed = getattr(self, "subtest_failed", set()) | {id(test)}

    def stopTest(self, test):
        signal.alarm(0)
        close_leftover_connections(test)
        if id(test) in getattr(self, "subtest_failed", set()) and id(test) in self.started:
            self._end(test, "fail")
            self.subtest_failed.discard(id(test))
        self.started.pop(id(test), None)
        # A finished test's id() may be reused by the holder of a later
        # setUpClass/tearDownClass error: that error is not this test's.
        self.names.pop(id(test), None)
        super().stopTest(test)


def iter_tests(suite):
    for item in suite:
        if isinstance(item, unittest.TestSuite):
            yield from iter_tests(item)
        else:
            yield item


def main():
    args = parse_args()
    src = os.path.abspath(args.src)
    os.chdir(src)  # tests/__init__.py finds tests/data/ssl relative to the working directory
    sys.path.insert(0, src)
    import mysql.connector

    import tests
    from tests import mysqld

    # The tests' own logger: warnings only (the suite logs every connection attempt at debug).
    tests.setup_logger(logging.getLogger(tests.LOGGER_NAME))
    logging.getLogger(tests.LOGGER_NAME).setLevel(logging.WARNING)
    version = configure(tests, mysqld, args)
    print(f"mysql-connector-python {mysql.connector.__version__} (C extension: {mysql.connector.HAVE_CEXT}) "
          f"against {args.user}@{args.host}:{args.port}/{args.database}, server {version}", flush=True)

    loader = unittest.TestLoader()
    only = re.compile(args.only) if args.only else None
    prefix = re.compile(r"^tests\.")
    wanted = unittest.TestSuite()
    failed_imports = []
    for module in args.modules:
        try:
            loaded = loader.loadTestsFromName(f"tests.{module}")
        except Exception:  # an import error is the module's result, not the runner's
            failed_imports.append((module, traceback.format_exc()))
            continue
        for test in iter_tests(loaded):
            name = prefix.sub("", test.id())
            if only is None or only.search(name):
                wanted.addTest(test)

    def name_of(test):
        method = getattr(test, "_testMethodName", None)
        if method is None:  # a setUpClass/setUpModule error: "setUpClass (tests.test_x.Class)"
            return prefix.sub("", test.id()).replace(" (tests.", " (")
        return prefix.sub("", f"{unittest.util.strclass(test.__class__)}.{method.split(' ')[0]}")

    with open(args.json, "w", encoding="utf-8") as out:
        signal.signal(signal.SIGALRM, on_alarm)
        result = JsonResult(out, name_of, args.test_timeout)
        for module, text in failed_imports:
            result._event("run", module)
            result._event("output", module, Output=text)
            result._event("fail", module)
        # Tests print tracebacks and notes to stdout: keep them out of the summary.
        started = time.monotonic()
        warnings.simplefilter("ignore")
        noise = io.StringIO()
        real_stdout = sys.stdout
        sys.stdout = noise
        try:
            wanted.run(result)
        finally:
            sys.stdout = real_stdout
    c = result.counts
    print(f"{wanted.countTestCases()} tests in {time.monotonic() - started:.0f}s: {c['pass']} passed, "
          f"{c['fail']} failed, {c['skip']} skipped; {len(failed_imports)} modules did not import", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
