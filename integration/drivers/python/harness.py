"""Driver-independent conformance checks for shardgate.

Each driver script (pymysql_conformance.py, connector_conformance.py) wraps
its driver in a `Driver` adapter and calls `main()`. Every check opens its
own connections through the proxy, runs the statements a real application
would, and then connects straight to the backend hosts with the same driver
(as shard/shardpw) to see where the rows landed and what they hold.

Every check runs even if an earlier one failed; each prints `ok` or `FAIL`
with the driver's error, and the script exits 1 if any check failed.

The 64-bit ID: (shard << 46) | (type << 36) | local_id (shard 16 bits, type 10, local 36).
"""

import argparse
import hashlib
import random
import sys
import time
import traceback
import uuid

SHARDS = 4096
TYPE_PIN = 1
TYPE_BOARD = 2
# A TEXT column holds 65,535 bytes: the stored large value is 60 KiB unless
# the column is bigger (MEDIUMTEXT and up), in which case it is 2 MiB.
TEXT_BYTES = 65535
STORED_SMALL = 60 * 1024
LARGE = 2 * 1024 * 1024
# Characters of every UTF-8 width (1, 2, 3 and 4 bytes), emoji with a
# skin-tone modifier and a ZWJ sequence, quotes and a backslash.
UTF8_SAMPLE = "Grüße, “quotes” 'single' \"double\" back\\slash — 中文 日本語 𝄞 🙂👍🏽👩‍💻 ñ"
ERR_SINGLE_SHARD = 1105
ERR_LOCK_WAIT = 1205
WARN_DIV_ZERO = 1365
WARN_TRUNCATED = 1265


class CheckFailed(AssertionError):
    pass


def expect(cond, what):
    if not cond:
        raise CheckFailed(what)


def expect_eq(got, want, what):
    if got != want:
        g, w = repr(got), repr(want)
        if len(g) > 300:
            g = g[:300] + f"... ({len(got) if hasattr(got, '__len__') else '?'} long)"
        if len(w) > 300:
            w = w[:300] + f"... ({len(want) if hasattr(want, '__len__') else '?'} long)"
        raise CheckFailed(f"{what}: got {g}, want {w}")


def decode_id(gid):
    gid = int(gid)
    return {
        "reserved": gid >> 62,
        "shard": (gid >> 46) & 0xFFFF,
        "type": (gid >> 36) & 0x3FF,
        "local": gid & ((1 << 36) - 1),
    }


def encode_id(shard, type_id, local):
    return (shard << 46) | (type_id << 36) | local


def mod_shard(key):
    return int(hashlib.md5(key.encode("utf-8")).hexdigest(), 16) % SHARDS


def shard_db(shard):
    return f"db{shard:05d}"


def mod_db(shard):
    return f"msdb{shard:05d}"


class Env:
    """The proxy address and the backend hosts (config/shardgate.yaml)."""

    def __init__(self, args, salt=""):
        self.host = args.host
        self.port = args.port
        self.user = args.user
        self.password = args.password
        self.backend_host = args.backend_host
        self.master_a = args.master_a
        self.master_b = args.master_b
        self.mod_host = args.mod_host
        self.backend_user = args.backend_user
        self.backend_password = args.backend_password
        self.rng = random.Random(f"{args.seed}-{salt}")

    def master_of(self, shard):
        return self.master_a if shard < 2048 else self.master_b

    def shard_on_a(self):
        return self.rng.randrange(0, 2048)

    def shard_on_b(self):
        return self.rng.randrange(2048, 4096)


class Driver:
    """Adapter over one DB-API driver (and one cursor kind).

    Subclasses implement connect(); the rest has DB-API defaults.
    SQL is written with %s placeholders; `prepared` drivers turn them into ?
    """

    name = "driver"
    prepared = False

    def connect(self, host, port, user, password, database=None, autocommit=None, **extra):
        raise NotImplementedError

    def cursor(self, conn):
        return conn.cursor()

    def sql(self, text):
        return text.replace("%s", "?") if self.prepared else text

    def execute(self, cur, text, params=None):
        if params is None:
            cur.execute(self.sql(text))
        else:
            cur.execute(self.sql(text), tuple(params))

    def begin(self, conn):
        conn.begin()

    def select_db(self, conn, name):
        """COM_INIT_DB."""
        conn.select_db(name)

    def warning_count(self, cur, conn):
        return cur.warning_count

    def show_warnings(self, conn):
        """(level, code, message) rows of SHOW WARNINGS (a plain text cursor,
        as drivers that fetch warnings do)."""
        cur = conn.cursor()
        cur.execute("SHOW WARNINGS")
        rows = [tuple(r) for r in cur.fetchall()]
        cur.close()
        return [(as_text(r[0]), int(r[1]), as_text(r[2])) for r in rows]

    def error_code(self, exc):
        raise NotImplementedError

    def error_message(self, exc):
        raise NotImplementedError

    def is_server_error(self, exc):
        raise NotImplementedError

    def extra_checks(self):
        """Driver-specific checks: [(name, function(env, driver))]."""
        return []


def as_text(value):
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8")
    return value


# ------------------------------------------------------------ helpers


class Session:
    """A proxy connection with the driver's defaults (autocommit off for
    PyMySQL and mysql-connector-python) and helpers for one-row queries."""

    def __init__(self, env, drv, autocommit=None, database=None, **extra):
        self.env = env
        self.drv = drv
        self.conn = drv.connect(env.host, env.port, env.user, env.password,
                                database=database, autocommit=autocommit, **extra)

    def run(self, text, params=None):
        cur = self.drv.cursor(self.conn)
        self.drv.execute(cur, text, params)
        return cur

    def run_text(self, text):
        """A statement on the driver's plain (text protocol) cursor, the way
        an application sends SETs even when it prepares its queries."""
        cur = self.conn.cursor()
        cur.execute(text)
        if cur.description:
            cur.fetchall()
        cur.close()

    def rows(self, text, params=None):
        cur = self.run(text, params)
        rows = [tuple(r) for r in cur.fetchall()] if cur.description else []
        cur.close()
        return rows

    def one(self, text, params=None):
        rows = self.rows(text, params)
        expect_eq(len(rows), 1, f"row count of {text!r} with {short(params)}")
        return rows[0]

    def insert(self, table, shard, data):
        """INSERT /*+ SHARD(n) */, returning the driver's lastrowid."""
        cur = self.run(f"INSERT /*+ SHARD({shard}) */ INTO {table} (data) VALUES (%s)", [data])
        gid = cur.lastrowid
        cur.close()
        expect(gid is not None and int(gid) > 0, f"lastrowid after an INSERT into shard {shard}: {gid!r}")
        return int(gid)

    def expect_error(self, text, params, code, what):
        try:
            cur = self.run(text, params)
            if cur.description:
                cur.fetchall()
            cur.close()
        except Exception as exc:  # noqa: BLE001 - the driver's error class varies
            if not self.drv.is_server_error(exc):
                raise CheckFailed(f"{what}: expected server error {code}, got {type(exc).__name__}: {exc}") from exc
            got = self.drv.error_code(exc)
            expect_eq(got, code, f"{what}: error code (message: {self.drv.error_message(exc)!r})")
            return self.drv.error_message(exc)
        raise CheckFailed(f"{what}: expected error {code}, the statement succeeded")

    def commit(self):
        self.conn.commit()

    def rollback(self):
        self.conn.rollback()

    def close(self):
        try:
            self.conn.close()
        except Exception:  # noqa: BLE001
            pass


def short(params):
    if params is None:
        return "no parameters"
    out = []
    for p in params:
        r = repr(p)
        out.append(r if len(r) <= 40 else r[:40] + f"...({len(p)})")
    return "(" + ", ".join(out) + ")"


class Direct:
    """A connection straight to a backend host, autocommit on."""

    def __init__(self, env, drv, port):
        self.drv = drv
        self.port = port
        self.conn = drv.connect(env.backend_host, port, env.backend_user, env.backend_password,
                                autocommit=True)

    def rows(self, text, params=None):
        cur = self.conn.cursor()
        cur.execute(text, tuple(params) if params is not None else None)
        rows = [tuple(r) for r in cur.fetchall()] if cur.description else []
        cur.close()
        return rows

    def close(self):
        try:
            self.conn.close()
        except Exception:  # noqa: BLE001
            pass


def on_host(env, drv, port, text, params=None):
    d = Direct(env, drv, port)
    try:
        return d.rows(text, params)
    finally:
        d.close()


def stored_data(env, drv, table, gid):
    """`data` of an object row read on the master that owns its shard, or
    None; also asserts the row is not on the other main master."""
    f = decode_id(gid)
    port = env.master_of(f["shard"])
    rows = on_host(env, drv, port,
                   f"SELECT data FROM {shard_db(f['shard'])}.{table} WHERE local_id = %s", [f["local"]])
    other = env.master_b if port == env.master_a else env.master_a
    elsewhere = on_host(env, drv, other,
                        "SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = %s",
                        [shard_db(f["shard"])])
    expect_eq(int(elsewhere[0][0]), 0,
              f"database {shard_db(f['shard'])} must exist only on its master {port}, but host {other} has it")
    return as_text(rows[0][0]) if rows else None


def expect_id(gid, shard, type_id, what):
    f = decode_id(gid)
    expect_eq((f["reserved"], f["shard"], f["type"]), (0, shard, type_id),
              f"{what}: (reserved, shard, type) decoded from id {gid}")
    expect(f["local"] > 0, f"{what}: local id of {gid} is 0")


def column_octets(env, drv, shard, table, column):
    rows = on_host(env, drv, env.master_of(shard),
                   "SELECT CHARACTER_OCTET_LENGTH FROM information_schema.columns "
                   "WHERE table_schema = %s AND table_name = %s AND column_name = %s",
                   [shard_db(shard), table, column])
    expect(rows, f"column {shard_db(shard)}.{table}.{column} not found on host {env.master_of(shard)}")
    return int(rows[0][0])


def big_text(n_bytes, seed):
    """A deterministic UTF-8 string of exactly n_bytes bytes mixing 1-4 byte
    characters."""
    rng = random.Random(seed)
    alphabet = ["a", "Z", "0", " ", "'", "\\", "\"", "é", "ß", "—", "中", "€", "🙂", "𝄞", "\n", "\t"]
    parts, size = [], 0
    while True:
        ch = rng.choice(alphabet)
        b = len(ch.encode("utf-8"))
        if size + b > n_bytes:
            break
        parts.append(ch)
        size += b
    parts.append("x" * (n_bytes - size))
    text = "".join(parts)
    assert len(text.encode("utf-8")) == n_bytes
    return text


def marker(env, what):
    return f'{{"driver_test":"{what}","r":{env.rng.randrange(1 << 30)}}}'


# ------------------------------------------------------------ checks


def check_connect_utf8mb4(env, drv):
    s = Session(env, drv)
    try:
        row = s.one("SELECT @@character_set_client, @@character_set_connection, @@character_set_results")
        expect_eq(tuple(as_text(v) for v in row), ("utf8mb4",) * 3,
                  "character sets of the session after connecting with charset utf8mb4")
        expect_eq(s.one("SELECT 1")[0], 1, "SELECT 1")
        version = as_text(s.one("SELECT @@version")[0])
        expect("MariaDB" in version or "MySQL" in version or version[:1].isdigit(),
               f"SELECT @@version answered {version!r}")
        expect_eq(s.one("SELECT DATABASE()")[0], None, "SELECT DATABASE() with no database")
        # Aliases name the columns (dict cursors and ORMs key rows by them).
        for sql in ("SELECT DATABASE() AS d", "SELECT LAST_INSERT_ID() AS d", "SELECT @@version AS d"):
            cur = s.run(sql)
            names = [c[0] for c in cur.description]
            cur.fetchall()
            cur.close()
            expect_eq([as_text(n) for n in names], ["d"], f"column names of {sql}")
        expect_eq(as_text(s.one("SELECT %s", ["héllo 🙂"])[0]), "héllo 🙂", "a utf8mb4 string echoed")
    finally:
        s.close()


def check_insert_by_hint_and_read_back(env, drv):
    s = Session(env, drv)
    try:
        for shard in (env.shard_on_a(), env.shard_on_b()):
            data = marker(env, f"hint-{shard}")
            gid = s.insert("pins", shard, data)
            expect_id(gid, shard, TYPE_PIN, f"lastrowid of INSERT /*+ SHARD({shard}) */ INTO pins")
            got = s.one("SELECT LAST_INSERT_ID()")[0]
            expect_eq(int(got), gid, "SELECT LAST_INSERT_ID() after the insert")
            s.commit()
            row = s.one("SELECT id, data FROM pins WHERE id = %s", [gid])
            expect_eq((int(row[0]), as_text(row[1])), (gid, data), f"SELECT id, data FROM pins WHERE id = {gid}")
            expect_eq(stored_data(env, drv, "pins", gid), data,
                      f"row {gid} on host {env.master_of(shard)} in {shard_db(shard)}.pins")
            # COLOCATE: a new object on the same shard as gid.
            data2 = marker(env, f"colocate-{shard}")
            cur = s.run(f"INSERT /*+ COLOCATE({gid}) */ INTO pins (data) VALUES (%s)", [data2])
            gid2 = int(cur.lastrowid)
            cur.close()
            s.commit()
            expect_id(gid2, shard, TYPE_PIN, f"lastrowid of INSERT /*+ COLOCATE({gid}) */")
            expect_eq(stored_data(env, drv, "pins", gid2), data2, f"COLOCATE row {gid2} on its host")
    finally:
        s.close()


def check_ids_bound_as_parameters(env, drv):
    s = Session(env, drv)
    try:
        shard = env.shard_on_b()
        a = s.insert("pins", shard, marker(env, "param-a"))
        b = s.insert("pins", shard, marker(env, "param-b"))
        s.commit()
        # The ID as an integer parameter and as a quoted decimal string.
        expect_eq(int(s.one("SELECT id FROM pins WHERE id = %s", [a])[0]), a, "id bound as an integer")
        expect_eq(int(s.one("SELECT id FROM pins WHERE id = %s", [str(a)])[0]), a, "id bound as a decimal string")
        got = sorted(int(r[0]) for r in s.rows("SELECT id FROM pins WHERE id IN (%s, %s)", [a, b]))
        expect_eq(got, sorted([a, b]), "id IN (a, b) of one shard, both bound")
        new = marker(env, "param-updated")
        cur = s.run("UPDATE pins SET data = %s WHERE id = %s", [new, b])
        expect_eq(cur.rowcount, 1, "rows matched by UPDATE ... WHERE id = <bound id>")
        cur.close()
        s.commit()
        expect_eq(stored_data(env, drv, "pins", b), new, f"updated row {b} on its host")
        # A mapping row lives on its board's shard; board and pin ids bound.
        board_shard = env.shard_on_a()
        board = s.insert("boards", board_shard, marker(env, "board"))
        expect_id(board, board_shard, TYPE_BOARD, "lastrowid of an INSERT into boards")
        cur = s.run("INSERT INTO board_has_pins (board_id, pin_id, sequence) VALUES (%s, %s, %s)", [board, a, 7])
        cur.close()
        s.commit()
        rows = s.rows("SELECT pin_id, sequence FROM board_has_pins WHERE board_id = %s", [board])
        expect_eq([(int(r[0]), int(r[1])) for r in rows], [(a, 7)], "board_has_pins read back by bound board_id")
        direct = on_host(env, drv, env.master_of(board_shard),
                         f"SELECT pin_id FROM {shard_db(board_shard)}.board_has_pins WHERE board_id = %s", [board])
        expect_eq([int(r[0]) for r in direct], [a],
                  f"board_has_pins row on host {env.master_of(board_shard)} in {shard_db(board_shard)}")
        # Mod-shard table: md5(email) % 4096 on the mod host.
        email = f"drv-{uuid.uuid4().hex}@example.com"  # unique across runs, whatever the seed
        cur = s.run("INSERT INTO user_by_email (email, user_id) VALUES (%s, %s)", [email, a])
        cur.close()
        s.commit()
        expect_eq([int(r[0]) for r in s.rows("SELECT user_id FROM user_by_email WHERE email = %s", [email])], [a],
                  "user_by_email read back by bound email")
        ms = mod_shard(email)
        direct = on_host(env, drv, env.mod_host,
                         f"SELECT user_id FROM {mod_db(ms)}.user_by_email WHERE email = %s", [email])
        expect_eq([int(r[0]) for r in direct], [a], f"user_by_email row on mod host {env.mod_host} in {mod_db(ms)}")
    finally:
        s.close()


def check_autocommit_off_reads_many_shards(env, drv):
    # Rows on four shards (two per master), committed by an autocommit session.
    setup = Session(env, drv, autocommit=True)
    try:
        shards = [env.shard_on_a(), env.shard_on_a(), env.shard_on_b(), env.shard_on_b()]
        rows = {}
        for sh in shards:
            data = marker(env, f"many-{sh}")
            rows[setup.insert("pins", sh, data)] = data
    finally:
        setup.close()
    s = Session(env, drv)  # the driver's default: autocommit off
    try:
        for gid, data in rows.items():
            got = s.one("SELECT id, data FROM pins WHERE id = %s", [gid])
            expect_eq(as_text(got[1]), data, f"read of shard {decode_id(gid)['shard']} with autocommit off")
        # A write binds the implicit transaction to shard a; reads of the
        # other shards still work, outside it.
        a = shards[0]
        data = marker(env, "bound-write")
        gid = s.insert("pins", a, data)
        for other, odata in rows.items():
            got = s.one("SELECT data FROM pins WHERE id = %s", [other])
            expect_eq(as_text(got[0]), odata,
                      f"plain read of shard {decode_id(other)['shard']} inside a transaction bound to shard {a}")
        expect_eq(as_text(s.one("SELECT data FROM pins WHERE id = %s", [gid])[0]), data,
                  "the transaction reads its own uncommitted write")
        expect_eq(stored_data(env, drv, "pins", gid), None, "the write is invisible on the host before COMMIT")
        s.commit()
        expect_eq(stored_data(env, drv, "pins", gid), data, "the write is on the host after COMMIT")
        # The next implicit transaction binds afresh (shard on master B), and
        # ROLLBACK undoes it.
        b = shards[2]
        gid_b = s.insert("pins", b, marker(env, "rolled-back"))
        s.rollback()
        expect_eq(stored_data(env, drv, "pins", gid_b), None, "a rolled back write is not on the host")
    finally:
        s.close()


def check_for_update_read_modify_write(env, drv):
    setup = Session(env, drv, autocommit=True)
    try:
        shard = env.shard_on_b()
        gid = setup.insert("pins", shard, '{"n":0}')
    finally:
        setup.close()
    s = Session(env, drv)
    other = Session(env, drv, autocommit=True)
    try:
        other.run_text("SET SESSION innodb_lock_wait_timeout = 1")
        for i in range(3):
            drv.begin(s.conn)
            cur_val = as_text(s.one("SELECT data FROM pins WHERE id = %s FOR UPDATE", [gid])[0])
            expect_eq(cur_val, f'{{"n":{i}}}', f"value read FOR UPDATE in round {i}")
            if i == 0:
                # The row lock is held by a real transaction on the shard.
                msg = other.expect_error("SELECT data FROM pins WHERE id = %s FOR UPDATE", [gid], ERR_LOCK_WAIT,
                                         "a second locking read of a row locked by another session's FOR UPDATE")
                expect("lock" in msg.lower(), f"lock wait timeout message: {msg!r}")
            cur = s.run("UPDATE pins SET data = %s WHERE id = %s", [f'{{"n":{i + 1}}}', gid])
            expect_eq(cur.rowcount, 1, "UPDATE after SELECT ... FOR UPDATE")
            cur.close()
            expect_eq(as_text(other.one("SELECT data FROM pins WHERE id = %s", [gid])[0]), f'{{"n":{i}}}',
                      "another session sees the committed value before COMMIT")
            s.commit()
        expect_eq(as_text(other.one("SELECT data FROM pins WHERE id = %s", [gid])[0]), '{"n":3}',
                  "value after three read-modify-write transactions")
        expect_eq(stored_data(env, drv, "pins", gid), '{"n":3}', "value on the host")
    finally:
        s.close()
        other.close()


def check_cross_shard_error_in_transaction(env, drv):
    setup = Session(env, drv, autocommit=True)
    try:
        a, b, c = env.shard_on_a(), env.shard_on_b(), env.shard_on_a()
        while c == a:
            c = env.shard_on_a()
        on_b = setup.insert("pins", b, marker(env, "cross-b"))
        on_c = setup.insert("pins", c, marker(env, "cross-c"))
    finally:
        setup.close()
    s = Session(env, drv)
    try:
        drv.begin(s.conn)
        first = s.insert("pins", a, marker(env, "cross-first"))
        for text, params, what, shard in [
            (f"INSERT /*+ SHARD({b}) */ INTO pins (data) VALUES (%s)", ["x"], "an INSERT", b),
            ("UPDATE pins SET data = %s WHERE id = %s", ["x", on_b], "an UPDATE", b),
            ("SELECT data FROM pins WHERE id = %s FOR UPDATE", [on_c], "a locking read (same host, other shard)", c),
        ]:
            msg = s.expect_error(text, params, ERR_SINGLE_SHARD,
                                 f"{what} for shard {shard} inside a transaction bound to shard {a}")
            expect(msg.startswith("shardgate:"), f"the error message starts with 'shardgate:': {msg!r}")
            expect("single-shard" in msg or "bound" in msg,
                   f"the error says transactions are single-shard / bound: {msg!r}")
            expect(str(a) in msg and str(shard) in msg, f"the error names shards {a} and {shard}: {msg!r}")
        # The transaction is still open: its own write is visible to it.
        expect_eq(len(s.rows("SELECT id FROM pins WHERE id = %s", [first])), 1,
                  "the transaction is still open after the refused statements")
        expect_eq(len(s.rows("SELECT id FROM pins WHERE id = %s", [on_b])), 1,
                  "a plain read of another shard inside the transaction")
        s.rollback()
        expect_eq(stored_data(env, drv, "pins", first), None, "the bound write is gone after ROLLBACK")
        # The connection goes on: a new transaction on shard b commits.
        expect_eq(s.one("SELECT 1")[0], 1, "SELECT 1 after ROLLBACK")
        data = marker(env, "after-rollback")
        gid = s.insert("pins", b, data)
        s.commit()
        expect_eq(stored_data(env, drv, "pins", gid), data, "a write after the ROLLBACK lands on its host")
    finally:
        s.close()


def check_utf8_text_with_emoji(env, drv):
    s = Session(env, drv)
    try:
        shard = env.shard_on_a()
        gid = s.insert("pins", shard, UTF8_SAMPLE)
        s.commit()
        expect_eq(as_text(s.one("SELECT data FROM pins WHERE id = %s", [gid])[0]), UTF8_SAMPLE,
                  "UTF-8 text read back through the proxy")
        f = decode_id(gid)
        rows = on_host(env, drv, env.master_of(shard),
                       f"SELECT HEX(data) FROM {shard_db(shard)}.pins WHERE local_id = %s", [f["local"]])
        expect_eq(as_text(rows[0][0]), UTF8_SAMPLE.encode("utf-8").hex().upper(),
                  "the stored bytes on the host (HEX(data))")
        got = s.one("SELECT CHAR_LENGTH(data), LENGTH(data) FROM pins WHERE id = %s", [gid])
        expect_eq((int(got[0]), int(got[1])), (len(UTF8_SAMPLE), len(UTF8_SAMPLE.encode("utf-8"))),
                  "CHAR_LENGTH and LENGTH of the stored text")
    finally:
        s.close()


def check_large_values_byte_exact(env, drv):
    s = Session(env, drv)
    try:
        # 2 MiB through the proxy and back: parameter in, result out.
        value = big_text(LARGE, 2)
        got = as_text(s.one("SELECT %s AS v", [value])[0])
        expect_eq(len(got.encode("utf-8")), LARGE, "byte length of a 2 MiB value echoed by SELECT")
        expect(got == value, "a 2 MiB value echoed by SELECT differs from what was sent")
        # Stored: 2 MiB once pins.data holds it (MEDIUMTEXT), else 60 KiB.
        shard = env.shard_on_b()
        capacity = column_octets(env, drv, shard, "pins", "data")
        size = LARGE if capacity >= LARGE else STORED_SMALL
        if size != LARGE:
            print(f"    note: pins.data holds {capacity} bytes (TEXT), so the stored value is {size} bytes; "
                  f"a 2 MiB stored value needs MEDIUMTEXT in config/schema.sql", flush=True)
        value = big_text(size, 3)
        gid = s.insert("pins", shard, value)
        s.commit()
        got = as_text(s.one("SELECT data FROM pins WHERE id = %s", [gid])[0])
        expect_eq(len(got.encode("utf-8")), size, f"byte length of the stored {size}-byte value read back")
        expect(got == value, f"the stored {size}-byte value read back through the proxy differs")
        stored = stored_data(env, drv, "pins", gid)
        expect(stored == value, f"the {size}-byte value on host {env.master_of(shard)} differs from what was sent")
    finally:
        s.close()


def expect_warning(drv, s, cur, code, what):
    # Rows first: unbuffered cursors learn the count from the final EOF/OK.
    if cur.description:
        cur.fetchall()
    count = drv.warning_count(cur, s.conn)
    cur.close()
    expect_eq(count, 1, f"warning count the driver saw after {what}")
    warnings = drv.show_warnings(s.conn)
    expect([w for w in warnings if w[1] == code],
           f"SHOW WARNINGS right after {what} must list warning {code}; it returned {warnings!r}")


def check_warnings(env, drv):
    # Both with the driver's default (autocommit off) and with autocommit on;
    # SHOW WARNINGS must describe the previous statement wherever it ran.
    for autocommit in (None, True):
        mode = "autocommit on" if autocommit else "autocommit off"
        s = Session(env, drv, autocommit=autocommit)
        try:
            shard = env.shard_on_b()
            gid = s.insert("pins", shard, marker(env, "warn"))
            s.commit()
            cur = s.run("SELECT id, 1/0 AS z FROM pins WHERE id = %s", [gid])
            expect_warning(drv, s, cur, WARN_DIV_ZERO,
                           f"SELECT id, 1/0 FROM pins WHERE id = {gid} (shard {shard}, {mode}, first after COMMIT)")
            cur = s.run("SELECT 1/0 AS z")
            expect_warning(drv, s, cur, WARN_DIV_ZERO, f"SELECT 1/0 (no table, {mode})")
            cur = s.run("SELECT id, 1/0 AS z FROM pins WHERE id = %s", [gid])
            expect_warning(drv, s, cur, WARN_DIV_ZERO, f"SELECT id, 1/0 FROM pins WHERE id = {gid} (shard {shard}, {mode})")
            # A write with a warning: the OK packet carries the count (and the
            # proxy's composed last-insert-id).
            cur = s.run(f"INSERT IGNORE /*+ SHARD({shard}) */ INTO pins (data, ts) VALUES (%s, %s)",
                        ["warn-ts", "2020-02-30 00:00:00"])
            gid2 = cur.lastrowid
            expect_warning(drv, s, cur, WARN_TRUNCATED, f"INSERT IGNORE with an invalid date into shard {shard} ({mode})")
            expect_id(int(gid2), shard, TYPE_PIN, "lastrowid of the INSERT IGNORE")
            s.commit()
            expect_eq(stored_data(env, drv, "pins", int(gid2)), "warn-ts", "the INSERT IGNORE row on its host")
        finally:
            s.close()


def check_use_shard_database(env, drv):
    shard = env.shard_on_a()
    setup = Session(env, drv, autocommit=True)
    try:
        data = marker(env, "use")
        gid = setup.insert("pins", shard, data)
    finally:
        setup.close()
    local = decode_id(gid)["local"]
    # The database named in the handshake.
    s = Session(env, drv, database=shard_db(shard))
    try:
        expect_eq(as_text(s.one("SELECT DATABASE()")[0]), shard_db(shard), "DATABASE() after connecting with it")
        expect_eq(as_text(s.one("SELECT data FROM pins WHERE local_id = %s", [local])[0]), data,
                  "an unqualified read in the connection's shard database")
    finally:
        s.close()
    # COM_INIT_DB.
    other = env.shard_on_b()
    s = Session(env, drv)
    try:
        drv.select_db(s.conn, shard_db(other))
        expect_eq(as_text(s.one("SELECT DATABASE()")[0]), shard_db(other), "DATABASE() after COM_INIT_DB")
        cur = s.run("INSERT INTO pins (data) VALUES (%s)", ["in-use"])
        gid2 = int(cur.lastrowid)
        cur.close()
        s.commit()
        expect_id(gid2, other, TYPE_PIN, f"lastrowid of an unqualified INSERT after selecting {shard_db(other)}")
        expect_eq(stored_data(env, drv, "pins", gid2), "in-use", "the row on its host")
    finally:
        s.close()


def check_session_settings(env, drv):
    s = Session(env, drv, autocommit=True)
    try:
        for stmt in ["SET NAMES utf8mb4", "SET time_zone = '+05:30'", "SET sql_mode = 'STRICT_ALL_TABLES'",
                     "SET @driver_marker = 'm-42'", "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED"]:
            s.run_text(stmt)
        want = ("+05:30", "STRICT_ALL_TABLES", "m-42", "READ-COMMITTED")
        got = s.one("SELECT @@session.time_zone, @@session.sql_mode, @driver_marker, @@session.tx_isolation")
        expect_eq(tuple(as_text(v) for v in got), want, "session settings read back (no table)")
        for shard in (env.shard_on_a(), env.shard_on_b()):
            gid = s.insert("pins", shard, "settings")
            got = s.one("SELECT id, @@session.time_zone, @@session.sql_mode, @driver_marker, "
                        "@@session.tx_isolation FROM pins WHERE id = %s", [gid])
            expect_eq(tuple(as_text(v) for v in got[1:]), want,
                      f"session settings on the backend connection serving shard {shard}")
    finally:
        s.close()


# Fleet photos of config/shardgate.yaml: Instagram's layout (time_ms bits
# 63-23 since this epoch, shard bits 22-10, a per-shard sequence bits 9-0),
# 16 shards dbp0000..dbp0015 on the mod host.
PHOTOS_EPOCH_MS = 1767225600000
PHOTOS_SHARDS = 16


def decode_photo_id(gid):
    return {"time_ms": gid >> 23, "shard": (gid >> 10) & ((1 << 13) - 1), "sequence": gid & 1023}


def check_time_layout_ids(env, drv):
    """The server mints a time-sortable id at INSERT into fleet photos: the
    driver's lastrowid is that id, it is stored in the row on its shard's
    host, it routes back, and one session's ids increase."""
    s = Session(env, drv)
    try:
        shard = env.rng.randrange(0, PHOTOS_SHARDS)
        since = int(time.time() * 1000) - PHOTOS_EPOCH_MS - 1000
        ids = []
        for n in range(5):
            data = marker(env, f"photo-{shard}-{n}")
            gid = s.insert("photos", shard, data)
            got = decode_photo_id(gid)
            until = int(time.time() * 1000) - PHOTOS_EPOCH_MS + 1000
            expect_eq(got["shard"], shard, f"shard field of minted id {gid}")
            expect(since <= got["time_ms"] <= until,
                   f"time field of minted id {gid}: {got['time_ms']} ms since the epoch, not within "
                   f"[{since}, {until}]")
            expect_eq(int(s.one("SELECT LAST_INSERT_ID()")[0]), gid, "SELECT LAST_INSERT_ID() after the insert")
            s.commit()
            row = s.one("SELECT id, data FROM photos WHERE id = %s", [gid])
            expect_eq((int(row[0]), as_text(row[1])), (gid, data), f"SELECT id, data FROM photos WHERE id = {gid}")
            stored = on_host(env, drv, env.mod_host, f"SELECT data FROM dbp{shard:04d}.photos WHERE id = %s", [gid])
            expect_eq([as_text(r[0]) for r in stored], [data], f"row {gid} in dbp{shard:04d}.photos on {env.mod_host}")
            ids.append(gid)
        expect_eq(ids, sorted(set(ids)), "one session's minted ids on one shard, in insert order")
        # A hint-less INSERT goes to a shard of the open range and comes back by its id.
        data = marker(env, "photo-open")
        cur = s.run("INSERT INTO photos (data) VALUES (%s)", [data])
        gid = int(cur.lastrowid)
        cur.close()
        s.commit()
        expect(decode_photo_id(gid)["shard"] < PHOTOS_SHARDS, f"shard of hint-less photo {gid}")
        expect_eq(as_text(s.one("SELECT data FROM photos WHERE id = %s", [gid])[0]), data,
                  f"the hint-less photo {gid} read back by its id")
    finally:
        s.close()


COMMON_CHECKS = [
    ("connect_utf8mb4", check_connect_utf8mb4),
    ("insert_by_hint_and_read_back", check_insert_by_hint_and_read_back),
    ("ids_bound_as_parameters", check_ids_bound_as_parameters),
    ("autocommit_off_reads_many_shards", check_autocommit_off_reads_many_shards),
    ("for_update_read_modify_write", check_for_update_read_modify_write),
    ("cross_shard_error_in_transaction", check_cross_shard_error_in_transaction),
    ("utf8_text_with_emoji", check_utf8_text_with_emoji),
    ("large_values_byte_exact", check_large_values_byte_exact),
    ("warnings", check_warnings),
    ("use_shard_database", check_use_shard_database),
    ("session_settings", check_session_settings),
    ("time_layout_ids", check_time_layout_ids),
]


# ------------------------------------------------------------ runner


def parse_args(description):
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--host", default="127.0.0.1", help="proxy host")
    p.add_argument("--port", type=int, required=True, help="proxy port")
    p.add_argument("--user", default="app")
    p.add_argument("--password", default="app")
    p.add_argument("--backend-host", default="127.0.0.1")
    p.add_argument("--master-a", type=int, default=3307, help="master of main shards 0-2047")
    p.add_argument("--master-b", type=int, default=3308, help="master of main shards 2048-4095")
    p.add_argument("--mod-host", type=int, default=3310, help="mod-shard host")
    p.add_argument("--backend-user", default="shard")
    p.add_argument("--backend-password", default="shardpw")
    p.add_argument("--seed", type=int, default=None, help="random seed for shard choice (printed)")
    p.add_argument("--only", action="append", default=[], help="run only checks whose name contains this")
    return p.parse_args()


def run(drivers, args):
    """Runs every check for every driver adapter; returns the exit code."""
    if args.seed is None:
        args.seed = random.randrange(1 << 31)
    print(f"proxy {args.host}:{args.port}; hosts A={args.master_a} B={args.master_b} mod={args.mod_host}; "
          f"seed {args.seed}", flush=True)
    passed, failed = 0, []
    for drv in drivers:
        env = Env(args, drv.name)
        for name, fn in COMMON_CHECKS + drv.extra_checks():
            if args.only and not any(o in name for o in args.only):
                continue
            label = f"{drv.name} {name}"
            start = time.monotonic()
            try:
                fn(env, drv)
            except Exception as exc:  # noqa: BLE001
                where = traceback.extract_tb(exc.__traceback__)
                mine = [fr for fr in where if fr.filename.endswith(("harness.py", "_conformance.py"))
                        and fr.name.startswith("check_")]
                at = f" (at {mine[-1].filename.rsplit('/', 1)[-1]}:{mine[-1].lineno} in {mine[-1].name})" if mine else ""
                print(f"FAIL {label}: {type(exc).__name__}: {exc}{at}", flush=True)
                failed.append(label)
            else:
                passed += 1
                print(f"ok   {label} ({time.monotonic() - start:.2f}s)", flush=True)
    print()
    if failed:
        print("failed checks:")
        for label in failed:
            print(f"  {label}")
    print(f"{passed} passed, {len(failed)} failed")
    return 1 if failed else 0


def main(drivers, description):
    args = parse_args(description)
    sys.exit(run(drivers, args))
