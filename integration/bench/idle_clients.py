#!/usr/bin/env python3
"""Idle clients and login rate, measured with raw sockets (no driver).

  idle   N connections log in (mysql_native_password) and stay idle; prints
         the proxy's VmRSS (from /proc/PID/status) before and after, and the
         bytes per idle session.
  logins repeated connect + login + COM_QUIT, sequential and with some
         concurrency; prints logins per second. Run it against the proxy
         and against a mariadbd directly with the same client to compare.

Examples (the local fleet, a proxy on 6033 whose pid is known):
  idle_clients.py idle --port 6033 --user app --password app -n 10000 --pid PID
  idle_clients.py logins --port 6033 --user app --password app --seconds 5
  idle_clients.py logins --port 3307 --user shard --password shardpw --seconds 5
"""

import argparse
import asyncio
import hashlib
import resource
import struct
import sys
import time

CLIENT_LONG_PASSWORD = 0x1
CLIENT_PROTOCOL_41 = 0x200
CLIENT_TRANSACTIONS = 0x2000
CLIENT_SECURE_CONNECTION = 0x8000
CLIENT_MULTI_RESULTS = 0x20000
CLIENT_PLUGIN_AUTH = 0x80000
CLIENT_DEPRECATE_EOF = 0x1000000
CAPABILITIES = (
    CLIENT_LONG_PASSWORD
    | CLIENT_PROTOCOL_41
    | CLIENT_TRANSACTIONS
    | CLIENT_SECURE_CONNECTION
    | CLIENT_MULTI_RESULTS
    | CLIENT_PLUGIN_AUTH
    | CLIENT_DEPRECATE_EOF
)


async def read_packet(reader):
    header = await reader.readexactly(4)
    length = header[0] | header[1] << 8 | header[2] << 16
    return header[3], await reader.readexactly(length)


def packet(seq, payload):
    return struct.pack("<I", len(payload))[:3] + bytes([seq]) + payload


def scramble(password, nonce):
    if not password:
        return b""
    stage1 = hashlib.sha1(password.encode()).digest()
    stage2 = hashlib.sha1(stage1).digest()
    mix = hashlib.sha1(nonce + stage2).digest()
    return bytes(a ^ b for a, b in zip(stage1, mix))


def nonce_of(greeting):
    """The 20-byte scramble of a HandshakeV10 payload."""
    end = greeting.index(b"\0", 1)
    pos = end + 1 + 4  # server version, connection id
    part1 = greeting[pos : pos + 8]
    pos += 8 + 1 + 2 + 1 + 2 + 2  # filler, caps low, charset, status, caps high
    auth_len = greeting[pos]
    pos += 1 + 10
    part2_len = max(13, auth_len - 8)
    part2 = greeting[pos : pos + part2_len].rstrip(b"\0")
    return part1 + part2


async def login(host, port, user, password):
    """Connects and logs in; returns the open (reader, writer)."""
    reader, writer = await asyncio.open_connection(host, port)
    _, greeting = await read_packet(reader)
    if greeting[0] == 0xFF:
        raise RuntimeError(f"refused: {greeting[9:].decode(errors='replace')}")
    nonce = nonce_of(greeting)
    auth = scramble(password, nonce)
    body = struct.pack("<IIB23x", CAPABILITIES, 1 << 24, 45)
    body += user.encode() + b"\0" + bytes([len(auth)]) + auth
    body += b"mysql_native_password\0"
    writer.write(packet(1, body))
    seq, answer = await read_packet(reader)
    if answer[0] == 0xFE:  # auth switch
        plugin_end = answer.index(b"\0", 1)
        nonce = answer[plugin_end + 1 :].rstrip(b"\0")
        writer.write(packet(seq + 1, scramble(password, nonce)))
        seq, answer = await read_packet(reader)
    if answer[0] != 0x00:
        raise RuntimeError(f"login failed: {answer[9:].decode(errors='replace')}")
    return reader, writer


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


async def idle(args):
    before = rss_kib(args.pid) if args.pid else None
    connections = []
    started = time.monotonic()
    batch = args.batch
    for first in range(0, args.n, batch):
        count = min(batch, args.n - first)
        connections += await asyncio.gather(
            *(login(args.host, args.port, args.user, args.password) for _ in range(count))
        )
    took = time.monotonic() - started
    print(f"{len(connections)} clients logged in in {took:.1f} s", flush=True)
    await asyncio.sleep(args.hold)
    if args.pid:
        after = rss_kib(args.pid)
        per = (after - before) * 1024 / max(1, len(connections))
        print(
            f"proxy VmRSS: {before / 1024:.1f} MiB before, {after / 1024:.1f} MiB with "
            f"{len(connections)} idle clients ({per:.0f} bytes each)"
        )
    for reader, writer in connections:
        writer.write(packet(0, b"\x01"))
        writer.close()
    await asyncio.sleep(0.5)


async def one_login(args):
    reader, writer = await login(args.host, args.port, args.user, args.password)
    writer.write(packet(0, b"\x01"))
    writer.close()
    await writer.wait_closed()


async def logins(args):
    for concurrency in args.concurrency:
        done = 0
        deadline = time.monotonic() + args.seconds
        started = time.monotonic()

        async def worker():
            nonlocal done
            while time.monotonic() < deadline:
                await one_login(args)
                done += 1

        await asyncio.gather(*(worker() for _ in range(concurrency)))
        took = time.monotonic() - started
        print(
            f"port {args.port} concurrency {concurrency}: {done} logins in {took:.1f} s = "
            f"{done / took:.0f} logins/s",
            flush=True,
        )


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=["idle", "logins"])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=6033)
    parser.add_argument("--user", default="app")
    parser.add_argument("--password", default="app")
    parser.add_argument("-n", type=int, default=1000, help="idle clients")
    parser.add_argument("--batch", type=int, default=200, help="logins in flight while connecting")
    parser.add_argument("--hold", type=float, default=2.0, help="seconds to stay idle before reading RSS")
    parser.add_argument("--pid", type=int, help="the proxy's pid, for VmRSS")
    parser.add_argument("--seconds", type=float, default=5.0, help="per concurrency level")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8])
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    asyncio.run(idle(args) if args.mode == "idle" else logins(args))


if __name__ == "__main__":
    sys.exit(main())
