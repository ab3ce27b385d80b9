#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets into fuzz/corpus/<target>/
(files named seed-*; entries the fuzzer found are named by their hash and
left alone). Run from anywhere: python3 fuzz/seeds.py

Sources:
- route: the statements of the router's tests (src/router/tests/*.rs, with
  the tests' IDs substituted) and the smuggling attacks of the lexing tests, under several
  session contexts (USE shard, sql_mode flags, character sets);
- admin_parse: the admin parser's test commands;
- handshake, frame: client streams the `mariadb` CLI sent to a MariaDB
  10.11 server (fuzz/captures/*.stream, recorded through a relay), plus an
  SSLRequest and COM_CHANGE_USER bodies;
- stmt_execute: COM_STMT_EXECUTE bodies as the binary protocol defines
  them (every parameter type, NULLs, long data, kept types).
"""

import re
import struct
from pathlib import Path

FUZZ = Path(__file__).resolve().parent
ROOT = FUZZ.parent
CORPUS = FUZZ / "corpus"


def write(target, name, data):
    folder = CORPUS / target
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob(f"seed-{name}*"):
        old.unlink()
    (folder / f"seed-{name}").write_bytes(data)


def clear_seeds(target):
    folder = CORPUS / target
    if folder.is_dir():
        for old in folder.glob("seed-*"):
            old.unlink()


def make_id(shard, type_id, local):
    return (shard << 46) | (type_id << 36) | local


SUBSTITUTIONS = {
    "PIN": 241294492511762325,
    "PIN_B": make_id(3429, 1, 5),
    "PIN_FAR": make_id(12, 1, 9),
    "BOARD": make_id(3429, 2, 77),
    "BOARD_FAR": make_id(100, 2, 1),
    "BOARD_B": make_id(3429, 2, 5),
    "COLOCATE": 241294561224164665,
    "COMPOSED": "((3429<<46)|(1<<36)|local_id)",
    "two": f"{make_id(3429, 1, 5)}, {make_id(12, 1, 9)}",
    "boards": f"{make_id(3429, 2, 77)}, {make_id(100, 2, 1)}",
    "db": "db03429",
    "local": 7075733,
    "key": "'user@example.com'",
    "id": 241294492511762325,
    "i": 7,
    "reserved": make_id(3429, 1023, 1),
    "email_db": "msdb00012",
    "shard": 3429,
    "ab_db": "db00001",
    "": 241294492511762325,
    "...": "x",
}

KEYWORDS = re.compile(
    r"^\s*(/\*|\(|SELECT|INSERT|UPDATE|DELETE|REPLACE|SET|USE|BEGIN|START|COMMIT|"
    r"ROLLBACK|SAVEPOINT|RELEASE|SHOW|DESC|EXPLAIN|CREATE|DROP|ALTER|TRUNCATE|"
    r"WITH|LOCK|UNLOCK|CALL|DO|HANDLER|LOAD|PREPARE|EXECUTE|GRANT|KILL|FLUSH|XA)",
    re.IGNORECASE,
)


def rust_strings(text):
    """The contents of the plain "..." literals of Rust source, unescaped."""
    out = []
    for match in re.finditer(r'(?<![r#\w])"((?:[^"\\\n]|\\.)*)"', text):
        raw = match.group(1)
        raw = raw.replace("\\n", "\n").replace("\\t", "\t").replace("\\r", "\r").replace('\\"', '"')
        raw = raw.replace("\\'", "'").replace("\\\\", "\\")
        out.append(raw)
    return out


def substitute(sql):
    def one(m):
        name = m.group(1)
        return str(SUBSTITUTIONS.get(name, m.group(0)))

    sql = re.sub(r"\{([A-Za-z_.]*)\}", one, sql)
    return sql.replace("{{", "{").replace("}}", "}")


ISSUE9_ATTACKS = [
    b"SELECT 1" + b" IS NULL" * 200,
    b"/*M!CREATE TABLE db00001.x (a int) */ SELECT local_id FROM db00001.pins LIMIT 0",
    b"SET @a=1 /*M!, GLOBAL max_connect_errors=4242 */",
    b"SET STATEMENT max_statement_time=1 FOR CREATE USER evil",
    b"SET STATEMENT max_statement_time=1 FOR KILL 1",
    b"SET STATEMENT sql_mode='' FOR SELECT data FROM pins WHERE id = 241294492511762325",
    b"SET sql_mode='NO_BACKSLASH_ESCAPES'; SET @x='\\', GLOBAL max_connect_errors=4243 -- '",
    b"SET @x='\\', GLOBAL max_connect_errors=4243 -- '",
    b"SELECT data FROM pins WHERE /*!id = 241294492511762325*/",
    b"SELECT data FROM pins WHERE /*!50000 id = 241294492511762325 */",
    b"SELECT data FROM pins WHERE /*M!100000 id = 241294492511762325 */",
    b"SELECT data FROM pins WHERE id = 241294492511762325 /*!99999 OR 1=1 */",
    b"SELECT data FROM pins WHERE id IN (241294492511762325, 3377699720527881) /*!, 1 */ ORDER BY data",
    b"SELECT /*+ SCATTER */ COUNT(*), data FROM pins /*!WHERE 1=1*/ GROUP BY data",
    b"UPDATE pins SET data = '/*!x*/' WHERE id = 241294492511762325",
    b"SELECT data FROM pins WHERE id = 241294492511762325 AND data = '\xe4\xbd\xa0\\' OR 1=1 -- '",
    b"SELECT data FROM pins WHERE id = 241294492511762325 AND data = 0x5c27",
    b"SELECT data FROM pins WHERE id = 241294492511762325 --\tcomment\nAND 1",
    b"SELECT data FROM pins WHERE id = 241294492511762325 #/*!x*/\n",
    b"SELECT \"a\"\"b\" FROM pins WHERE id = 241294492511762325",
    b"UPDATE mysql.global_priv SET priv = '{}' WHERE user = 'app'",
    b"SELECT authentication_string FROM mysql.user",
    b"INSERT INTO information_schema.tables VALUES (1)",
    b"SELECT HEX('\xe9')",
    b"SELECT 1 IN (" + b"1," * 300 + b"1)",
    b"SELECT " + b"(" * 100 + b"1" + b")" * 100,
]


def route_seeds():
    clear_seeds("route")
    statements = []
    seen = set()
    for source in sorted((ROOT / "src/router/tests").glob("*.rs")):
        for literal in rust_strings(source.read_text()):
            if not KEYWORDS.match(literal):
                continue
            sql = substitute(literal).encode()
            if sql not in seen and len(sql) < 2000:
                seen.add(sql)
                statements.append(sql)
    # Session contexts: flags byte, choice byte, USE shard (3429 on main).
    contexts = [
        (0x00, 0x03),  # utf8, no USE, version 10.11.19
        (0xA0, 0x02),  # USE db03429, split statements
        (0x41, 0x02),  # NO_BACKSLASH_ESCAPES, route_prepare
        (0x0E, 0x03),  # ANSI_QUOTES, gbk
    ]
    for n, sql in enumerate(statements):
        flags, choice = contexts[n % len(contexts)]
        write("route", f"test-{n:03}", bytes([flags, choice]) + struct.pack("<H", 3429) + sql)
    for n, sql in enumerate(ISSUE9_ATTACKS):
        for flags, choice in [(0x80, 0x03), (0x81, 0x03), (0x8C, 0x03), (0x92, 0x04)]:
            data = bytes([flags, choice]) + struct.pack("<H", 1) + sql
            write("route", f"issue9-{n:02}-{flags:02x}", data)


def admin_seeds():
    clear_seeds("admin_parse")
    text = (ROOT / "src/admin/parse.rs").read_text()
    commands = sorted(set(re.findall(r'parse\("((?:[^"\\]|\\.)*)"\)', text)))
    commands = [c.replace("\\n", "\n").replace("\\t", "\t") for c in commands]
    commands += [
        "SHOW SHARDS LIKE 'msdb0001%'",
        "ENCODE ID 4095 user 68719476735",
        "DECODE ID 18446744073709551615",
        "PAUSE SHARDS 0-4095 IN main",
        "RESUME SHARDS 4294967295",
        "SELECT @@version, USER(), CONNECTION_ID(), @@global.max_allowed_packet",
        "EXPLAIN ROUTE /*M!CREATE TABLE db00001.x (a int) */ SELECT 1",
        "PROMOTE REPLICA `127.0.0.1:3307` STOP REPLICATION",
    ]
    for n, command in enumerate(commands):
        write("admin_parse", f"{n:03}", command.encode())


def frames(stream):
    """(seq, payload) of each frame of a captured stream."""
    at = 0
    while at + 4 <= len(stream):
        length = int.from_bytes(stream[at : at + 3], "little")
        yield stream[at + 3], stream[at + 4 : at + 4 + length]
        at += 4 + length


def frame(seq, payload):
    return len(payload).to_bytes(3, "little") + bytes([seq]) + payload


def captures():
    return sorted((FUZZ / "captures").glob("*.stream"))


def change_user_body(user, auth, db, collation, plugin, attrs=b""):
    return (
        user + b"\0" + bytes([len(auth)]) + auth + db + b"\0"
        + struct.pack("<H", collation) + plugin + b"\0" + attrs
    )


def handshake_seeds():
    clear_seeds("handshake")
    for path in captures():
        stream = path.read_bytes()
        first_seq, first = next(frames(stream))
        rest = stream[4 + len(first) :]
        name = path.stem
        # The first packet given, then the rest of the stream.
        write("handshake", f"{name}", b"\x00" + struct.pack("<H", len(first)) + first + rest)
        # The whole stream read by login (framed).
        write("handshake", f"{name}-framed", b"\x02\x00\x00" + stream)
    ssl_request = struct.pack("<IIB", 0x000AA28C | 0x800, 16 << 20, 45) + b"\0" * 23
    write("handshake", "ssl-request", b"\x00" + struct.pack("<H", 32) + ssl_request)
    write("handshake", "ssl-request-offered", b"\x01" + struct.pack("<H", 32) + ssl_request)
    for n, body in enumerate(
        [
            change_user_body(b"app", b"\x11" * 20, b"db00001", 45, b"mysql_native_password"),
            change_user_body(b"guest", b"", b"", 28, b"mysql_native_password"),
            change_user_body(b"app", b"\x22" * 20, b"", 33, b"caching_sha2_password",
                             b"\x0c\x04_pid\x0412345"),
        ]
    ):
        switch_answer = frame(3, b"\x33" * 20)
        write("handshake", f"change-user-{n}", b"\x0c" + struct.pack("<H", len(body)) + body + switch_answer)


def frame_seeds():
    clear_seeds("frame")
    literal = 3  # op: the rest of the input, literally
    for path in captures():
        stream = path.read_bytes()
        for chunk in (0, 1, 3):
            write("frame", f"{path.stem}-{chunk}", bytes([chunk, literal]) + stream)
    full = 0xFFFFFF

    def fill_frame(length, seq, byte):
        return bytes([1]) + length.to_bytes(3, "little") + bytes([seq, byte])

    # A packet of two full frames and a short one.
    write("frame", "continued", bytes([3]) + fill_frame(full, 0, 0x41) + fill_frame(full, 1, 0x42)
          + fill_frame(10, 2, 0x43))
    # A packet of exactly one full frame and the empty frame that ends it.
    write("frame", "exact-multiple", bytes([3]) + fill_frame(full, 0, 0x41) + fill_frame(0, 1, 0))
    # Continuation frames past the 64 MiB packet limit.
    write("frame", "past-limit", bytes([3]) + b"".join(fill_frame(full, s, 0x61) for s in range(5))
          + fill_frame(1, 5, 0x62))
    # Four full frames and a short one: a packet 96 bytes past the limit
    # (the reader returned it, holding 128 MiB, until it checked the
    # limit before joining each frame).
    write("frame", "limit-plus-96", bytes([3]) + b"".join(fill_frame(full, s, 0x61) for s in range(4))
          + fill_frame(100, 4, 0x62))
    # A header announcing a full frame that never comes.
    write("frame", "truncated", bytes([2, 0, 4]) + b"\xff\xff\xff\x00")


COM_STMT_EXECUTE = 0x17
T = {
    "DECIMAL": 0, "TINY": 1, "SHORT": 2, "LONG": 3, "FLOAT": 4, "DOUBLE": 5, "NULL": 6,
    "TIMESTAMP": 7, "LONGLONG": 8, "INT24": 9, "DATE": 10, "TIME": 11, "DATETIME": 12,
    "YEAR": 13, "VARCHAR": 15, "BIT": 16, "JSON": 245, "NEWDECIMAL": 246, "BLOB": 252,
    "VAR_STRING": 253, "STRING": 254,
}


def lenenc_bytes(data):
    n = len(data)
    if n < 251:
        prefix = bytes([n])
    elif n < 1 << 16:
        prefix = b"\xfc" + n.to_bytes(2, "little")
    elif n < 1 << 24:
        prefix = b"\xfd" + n.to_bytes(3, "little")
    else:
        prefix = b"\xfe" + n.to_bytes(8, "little")
    return prefix + data


def execute_body(params, statement_id=1, bound=True):
    """COM_STMT_EXECUTE payload (without the command byte) for params, a
    list of (type name, unsigned, encoded value or None for NULL)."""
    count = len(params)
    body = struct.pack("<IBI", statement_id, 0, 1)
    if count:
        bitmap = bytearray((count + 7) // 8)
        for i, (_, _, value) in enumerate(params):
            if value is None:
                bitmap[i // 8] |= 1 << (i % 8)
        body += bytes(bitmap) + (b"\x01" if bound else b"\x00")
        if bound:
            for type_name, unsigned, _ in params:
                body += bytes([T[type_name], 0x80 if unsigned else 0])
        for _, _, value in params:
            if value is not None:
                body += value
    return body


def stmt_seed(params, kept=(), long_data=(), bound=True):
    count = len(params)
    head = struct.pack("<H", count if count < 16 else 0x8000 | count)
    head += bytes([len(kept)]) + b"".join(bytes([T[t], 0x80 if u else 0]) for t, u in kept)
    head += bytes([len(long_data)])
    for index, data in long_data:
        head += struct.pack("<HH", index, len(data)) + data
    return head + execute_body(params, bound=bound)


def stmt_execute_seeds():
    clear_seeds("stmt_execute")
    datetime = struct.pack("<HBBBBBI", 2024, 2, 29, 23, 59, 58, 999999)
    seeds = {
        "key-text-null": [
            ("LONGLONG", False, struct.pack("<q", 241294492511762325)),
            ("VAR_STRING", False, lenenc_bytes(b"hello")),
            ("VAR_STRING", False, None),
        ],
        "integers": [
            ("TINY", False, struct.pack("<b", -5)),
            ("SHORT", True, struct.pack("<H", 65535)),
            ("LONG", False, struct.pack("<i", -2147483648)),
            ("INT24", False, struct.pack("<i", 8388607)),
            ("YEAR", False, struct.pack("<H", 2024)),
            ("LONGLONG", True, struct.pack("<Q", 18446744073709551615)),
        ],
        "floats": [
            ("FLOAT", False, struct.pack("<f", 1.5)),
            ("DOUBLE", False, struct.pack("<d", -2.25e300)),
            ("DOUBLE", False, struct.pack("<d", float("nan"))),
            ("DOUBLE", False, struct.pack("<d", 5e-324)),
        ],
        "dates": [
            ("DATETIME", False, bytes([11]) + datetime),
            ("DATE", False, bytes([4]) + struct.pack("<HBB", 1999, 12, 31)),
            ("TIMESTAMP", False, bytes([7]) + datetime[:7]),
            ("DATETIME", False, bytes([0])),
            ("TIME", False, bytes([12]) + struct.pack("<BIBBBI", 1, 3, 2, 3, 4, 5)),
            ("TIME", False, bytes([8]) + struct.pack("<BIBBB", 0, 0, 23, 59, 59)),
        ],
        "decimals-blobs": [
            ("NEWDECIMAL", False, lenenc_bytes(b"-123.4500")),
            ("DECIMAL", False, lenenc_bytes(b"1e5")),
            ("BLOB", False, lenenc_bytes(b"\x00\x5c\x27\xff\x22")),
            ("BIT", False, lenenc_bytes(b"\x01")),
            ("JSON", False, lenenc_bytes(b'{"a": [1, "\\u0027"]}')),
        ],
        "injection-text": [
            ("VAR_STRING", False, lenenc_bytes("你\\' UNION SELECT authentication_string FROM mysql.user -- ".encode())),
            ("STRING", False, lenenc_bytes(b"a\\\\'b\x00c\x1a\n'' \\%_")),
            ("VARCHAR", False, lenenc_bytes(b"\xd5\x5c\x27 gbk trail")),
            ("VAR_STRING", False, lenenc_bytes(b"*/ /*!x */ -- #")),
        ],
        "null-type": [("NULL", False, b""), ("LONGLONG", False, None)],
        "many": [("LONG", False, struct.pack("<i", i)) for i in range(40)],
        "long-text": [("VAR_STRING", False, lenenc_bytes(b"x" * 300))],
    }
    for name, params in seeds.items():
        write("stmt_execute", name, stmt_seed(params))
    write("stmt_execute", "no-params", stmt_seed([]))
    kept_params = [("LONG", False, struct.pack("<i", 7)), ("VAR_STRING", False, lenenc_bytes(b"kept"))]
    write("stmt_execute", "kept-types",
          stmt_seed(kept_params, kept=[("LONG", False), ("VAR_STRING", False)], bound=False))
    long_params = [("VAR_STRING", False, None), ("BLOB", False, None), ("LONG", False, struct.pack("<i", 1))]
    write("stmt_execute", "long-data",
          stmt_seed(long_params, long_data=[(0, "long ' text \\".encode()), (1, b"\x00\xff" * 20)]))


def main():
    route_seeds()
    admin_seeds()
    handshake_seeds()
    frame_seeds()
    stmt_execute_seeds()
    total = sum(p.stat().st_size for p in CORPUS.rglob("*") if p.is_file())
    files = sum(1 for p in CORPUS.rglob("*") if p.is_file())
    print(f"corpus: {files} files, {total} bytes")


if __name__ == "__main__":
    main()
