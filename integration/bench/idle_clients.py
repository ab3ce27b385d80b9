#!/usr/bin/env python3
"""Many logged-in idle MySQL client connections, and the login rate.

Driven by integration/bench/idle_clients.sh. A minimal asyncio MySQL client
(standard library only): TCP connect, read the server's greeting, answer with
a mysql_native_password handshake response (an auth switch to that plugin is
followed), wait for OK. No statement is sent.

  idle_clients.py logins HOST PORT USER PASSWORD COUNT CONCURRENCY PID
      COUNT logins, CONCURRENCY at a time, each closed (COM_QUIT) right after
      its OK. Prints one JSON line: logins, seconds, logins_per_s, the CPU
      seconds of process PID (0: none) and of this client during the logins.

  idle_clients.py hold HOST PORT USER PASSWORD COUNT CONCURRENCY PID HOLD_S
      Opens COUNT logged-in connections (CONCURRENCY logins in flight) and
      keeps them all open; reads the RSS of PID from /proc before the first
      login, once all are open, and after HOLD_S more seconds; checks that
      every connection is still open (a connection the server closed reads
      EOF); then closes them all and reads the RSS once more after 2 s.
      Prints one JSON line.
"""

import asyncio
import hashlib
import json
import os
import resource
import struct
import sys
import time

CLIENT_LONG_PASSWORD = 0x1
CLIENT_PROTOCOL_41 = 0x200
CLIENT_TRANSACTIONS = 0x2000
CLIENT_SECURE_CONNECTION = 0x8000
CLIENT_PLUGIN_AUTH = 0x80000
CAPS = (CLIENT_LONG_PASSWORD | CLIENT_PROTOCOL_41 | CLIENT_TRANSACTIONS
        | CLIENT_SECURE_CONNECTION | CLIENT_PLUGIN_AUTH)
NATIVE = b"mysql_native_password"


class LoginError(Exception):
    """The server refused the login or broke the protocol."""


def scramble(password: bytes, nonce: bytes) -> bytes:
    if not password:
        return b""
    h1 = hashlib.sha1(password).digest()
    h2 = hashlib.sha1(h1).digest()
    h3 = hashlib.sha1(nonce + h2).digest()
    return bytes(a ^ b for a, b in zip(h1, h3))


async def read_packet(reader):
    head = await reader.readexactly(4)
    length = head[0] | head[1] << 8 | head[2] << 16
    return head[3], await reader.readexactly(length)


def write_packet(writer, seq, payload):
    n = len(payload)
    writer.write(bytes((n & 0xFF, n >> 8 & 0xFF, n >> 16 & 0xFF, seq & 0xFF)) + payload)


def parse_greeting(p: bytes) -> bytes:
    if p[:1] == b"\xff":
        raise LoginError("server refused the connection: %r" % p[9:].decode(errors="replace"))
    end = p.index(b"\0", 1)
    pos = end + 1 + 4
    part1 = p[pos:pos + 8]
    pos += 8 + 1 + 2 + 1 + 2 + 2
    auth_len = p[pos]
    pos += 1 + 10
    part2 = p[pos:pos + max(13, auth_len - 8)]
    return part1 + part2.rstrip(b"\0")


async def login(host, port, user: bytes, password: bytes):
    reader, writer = await asyncio.open_connection(host, port)
    try:
        _, greeting = await read_packet(reader)
        nonce = parse_greeting(greeting)
        payload = (struct.pack("<IIB", CAPS, 1 << 24, 45) + b"\0" * 23 + user + b"\0"
                   + bytes((20 if password else 0,)) + scramble(password, nonce)
                   + NATIVE + b"\0")
        write_packet(writer, 1, payload)
        seq, reply = await read_packet(reader)
        if reply[:1] == b"\xfe":
            end = reply.index(b"\0", 1)
            plugin, nonce = reply[1:end], reply[end + 1:].rstrip(b"\0")
            if plugin != NATIVE:
                raise LoginError("server asks for auth plugin %r" % plugin)
            write_packet(writer, seq + 1, scramble(password, nonce))
            seq, reply = await read_packet(reader)
        if reply[:1] != b"\x00":
            raise LoginError("login refused: %r" % reply[9:].decode(errors="replace"))
        return reader, writer
    except BaseException:
        writer.close()
        raise


def quit_and_close(writer):
    try:
        write_packet(writer, 0, b"\x01")
    finally:
        writer.close()


def cpu_s(pid: int) -> float:
    if pid <= 0:
        return 0.0
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def own_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def rss_kib(pid: int) -> int:
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


async def run_logins(host, port, user, password, count, concurrency, pid):
    left = count
    errors = []

    async def worker():
        nonlocal left
        while left > 0:
            left -= 1
            try:
                _, writer = await login(host, port, user, password)
                quit_and_close(writer)
            except (OSError, LoginError, asyncio.IncompleteReadError) as e:
                errors.append(repr(e))

    c0, o0, t0 = cpu_s(pid), own_cpu_s(), time.monotonic()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    secs = time.monotonic() - t0
    if errors:
        sys.exit("%d of %d logins failed, first: %s" % (len(errors), count, errors[0]))
    return {"logins": count, "seconds": round(secs, 3), "logins_per_s": round(count / secs, 1),
            "server_cpu_s": round(cpu_s(pid) - c0, 3), "client_cpu_s": round(own_cpu_s() - o0, 3)}


async def run_hold(host, port, user, password, count, concurrency, pid, hold_s):
    conns = []
    errors = []
    sem = asyncio.Semaphore(concurrency)

    async def one():
        async with sem:
            try:
                conns.append(await login(host, port, user, password))
            except (OSError, LoginError, asyncio.IncompleteReadError) as e:
                errors.append(repr(e))

    rss0, c0, t0 = rss_kib(pid), cpu_s(pid), time.monotonic()
    await asyncio.gather(*(one() for _ in range(count)))
    open_s = time.monotonic() - t0
    open_cpu = cpu_s(pid) - c0
    if errors:
        for _, w in conns:
            w.close()
        sys.exit("%d of %d logins failed, first: %s" % (len(errors), count, errors[0]))
    rss1 = rss_kib(pid)
    c1 = cpu_s(pid)
    await asyncio.sleep(hold_s)
    rss2 = rss_kib(pid)
    idle_cpu = cpu_s(pid) - c1
    # Still open? A closed connection is readable (EOF or an error packet);
    # an open idle one times out.
    async def readable(r):
        try:
            await asyncio.wait_for(r.read(1), timeout=0.5)
            return True
        except asyncio.TimeoutError:
            return False

    closed = sum(await asyncio.gather(*(readable(r) for r, _ in conns)))
    for _, w in conns:
        quit_and_close(w)
    await asyncio.sleep(2)
    rss3 = rss_kib(pid)
    return {"connections": count, "open_seconds": round(open_s, 3),
            "logins_per_s": round(count / open_s, 1), "server_cpu_s_logins": round(open_cpu, 3),
            "rss_kib_before": rss0, "rss_kib_open": rss1, "rss_kib_after_hold": rss2,
            "rss_kib_after_close": rss3, "hold_seconds": hold_s,
            "server_cpu_s_idle": round(idle_cpu, 3), "closed_by_server": closed,
            "kib_per_connection": round((rss2 - rss0) / count, 2)}


def main():
    if len(sys.argv) < 9 or sys.argv[1] not in ("logins", "hold"):
        sys.exit(__doc__)
    what, host, port, user, password, count, concurrency, pid = sys.argv[1:9]
    args = (host, int(port), user.encode(), password.encode(), int(count), int(concurrency), int(pid))
    if what == "logins":
        out = asyncio.run(run_logins(*args))
    else:
        out = asyncio.run(run_hold(*args, float(sys.argv[9]) if len(sys.argv) > 9 else 5.0))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
