#!/usr/bin/env node
// mysql2 sessions under load through `serve --takeover` hand-offs.
//
//   NODE_PATH=integration/drivers/node/node_modules node integration/drivers/takeover/mysql2_load.js \
//     --port 6033 --sessions 21 --seconds 300 --stop /tmp/stop --tag tkl-123-js --shards 14,3000 --out js.json
//
// Each session (its own connection) sets a user variable (@client), two
// session variables (time_zone, sql_mode), a current database (USE dbNNNNN,
// its shard) and prepares `SELECT data FROM pins WHERE id = ?` once
// (conn.prepare: COM_STMT_PREPARE; the statement id is kept and executed
// with COM_STMT_EXECUTE for the whole run). Then, until the file --stop
// exists (or --seconds passed): INSERT a
// row (every third inside BEGIN ... COMMIT, read back in the transaction), the
// prepared point read of the row by its 64-bit ID, and `SELECT @client,
// @@session.time_zone, @@session.sql_mode, DATABASE(), CONNECTION_ID()`, which
// must answer what the session set (a changed CONNECTION_ID() is a reconnect).
// Every failed statement is counted; a connection that fails is opened again
// (a reconnect). The JSON report (--out) is the one pymysql_load.py writes.
'use strict';

const fs = require('fs');
const path = require('path');
const mysql = require(path.join(__dirname, '../node/node_modules/mysql2/promise'));

const SQL_MODE = 'STRICT_ALL_TABLES,NO_ZERO_DATE';
const TIME_ZONE = '+03:00';
// Statements at least this long are listed (start, ms) for the verdict.
const SLOW_MS = 50;
const STATE_SQL = 'SELECT @client AS c, @@session.time_zone AS tz, @@session.sql_mode AS m, DATABASE() AS d, CONNECTION_ID() AS i';

function parseArgs(argv) {
  const a = { host: '127.0.0.1', user: 'app', password: 'app' };
  for (let i = 2; i < argv.length; i += 2) a[argv[i].replace(/^--/, '')] = argv[i + 1];
  for (const k of ['port', 'sessions', 'seconds', 'stop', 'tag', 'shards', 'out']) {
    if (a[k] === undefined) throw new Error(`--${k} is required`);
  }
  a.port = Number(a.port);
  a.sessions = Number(a.sessions);
  a.seconds = Number(a.seconds);
  a.shards = a.shards.split(',').map(Number);
  return a;
}

class Session {
  constructor(args, index, shard) {
    this.args = args;
    this.shard = shard;
    this.name = `${args.tag}-s${index}`;
    this.db = 'db' + String(shard).padStart(5, '0');
    this.statements = 0;
    this.errors = 0;
    this.reconnects = 0;
    this.stateFailures = 0;
    this.samples = [];
    this.longest = 0;
    this.longestAt = 0;
    this.slow = [];
    this.acked = [];
    this.expected = null;
  }

  sample(text) {
    if (this.samples.length < 5) this.samples.push(`${this.name}: ${text}`);
  }

  async run(fn) {
    const started = process.hrtime.bigint();
    try {
      return await fn();
    } finally {
      const took = Number(process.hrtime.bigint() - started) / 1e6;
      this.statements += 1;
      if (took > this.longest) {
        this.longest = took;
        this.longestAt = Date.now() / 1000;
      }
      if (took >= SLOW_MS && this.slow.length < 1000) this.slow.push([(Date.now() - took) / 1000, Math.round(took * 10) / 10]);
    }
  }

  async state() {
    const [rows] = await this.run(() => this.conn.query(STATE_SQL));
    if (rows.length !== 1) return null;
    const r = rows[0];
    return [r.c, r.tz, r.m, r.d, r.i].map((v) => (v === null ? 'NULL' : Buffer.isBuffer(v) ? v.toString() : String(v)));
  }

  async open() {
    this.conn = await mysql.createConnection({
      host: this.args.host, port: this.args.port, user: this.args.user, password: this.args.password,
      charset: 'utf8mb4', supportBigNumbers: true, bigNumberStrings: true, connectTimeout: 10000,
    });
    this.conn.on('error', () => {}); // a dead connection shows as the next statement's error
    await this.run(() => this.conn.query(`USE ${this.db}`));
    await this.run(() => this.conn.query('SET @client = ?', [this.name]));
    await this.run(() => this.conn.query('SET SESSION time_zone = ?', [TIME_ZONE]));
    await this.run(() => this.conn.query('SET SESSION sql_mode = ?', [SQL_MODE]));
    this.read = await this.run(() => this.conn.prepare('SELECT data FROM pins WHERE id = ?'));
    const got = await this.state();
    if (this.expected === null) {
      const want = [this.name, TIME_ZONE, SQL_MODE, this.db];
      if (!got || want.some((v, i) => got[i] !== v)) {
        this.stateFailures += 1;
        this.sample(`after setting it up: ${JSON.stringify(got)}`);
      }
      this.expected = got;
    } else if (got) {
      this.expected = this.expected.slice(0, 4).concat([got[4]]);
    }
  }

  async readBack(id, data, where) {
    const [rows] = await this.run(() => this.read.execute([id]));
    const values = rows.map((r) => (Buffer.isBuffer(r.data) ? r.data.toString() : r.data));
    if (values.length !== 1 || values[0] !== data) {
      this.stateFailures += 1;
      this.sample(`${where}: id ${id} reads ${JSON.stringify(values)}, not ${data}`);
    }
  }

  async step(n) {
    const data = `${this.name}-${n}`;
    let id;
    if (n % 3 === 0) {
      await this.run(() => this.conn.query('BEGIN'));
      const [res] = await this.run(() => this.conn.query('INSERT INTO pins (data) VALUES (?)', [data]));
      id = String(res.insertId);
      await this.readBack(id, data, 'in the transaction');
      await this.run(() => this.conn.query('COMMIT'));
    } else {
      const [res] = await this.run(() => this.conn.query('INSERT INTO pins (data) VALUES (?)', [data]));
      id = String(res.insertId);
    }
    this.acked.push([this.shard, id, data]);
    await this.readBack(id, data, 'prepared read');
    const got = await this.state();
    const same = got && got.every((v, i) => v === this.expected[i]);
    if (!same) {
      if (got && got[4] !== this.expected[4]) this.reconnects += 1;
      this.stateFailures += 1;
      this.sample(`state ${JSON.stringify(got)}, expected ${JSON.stringify(this.expected)}`);
      if (got) this.expected = this.expected.slice(0, 4).concat([got[4]]);
    }
  }

  async main(deadline) {
    try {
      await this.open();
    } catch (e) {
      this.errors += 1;
      this.sample(`connect: ${e.code || ''} ${e.message}`);
      return;
    }
    let n = 0;
    while (Date.now() < deadline && !fs.existsSync(this.args.stop)) {
      n += 1;
      try {
        await this.step(n);
      } catch (e) {
        this.errors += 1;
        this.sample(`statement ${n}: ${e.code || ''} ${e.errno || ''} ${e.message}`);
        // Never leave a transaction open (it would hold the session in the old process).
        if (!e.fatal) await this.conn.query('ROLLBACK').catch(() => {});
        if (e.fatal) {
          this.reconnects += 1;
          try {
            await this.open();
          } catch (e2) {
            this.errors += 1;
            this.sample(`reconnect: ${e2.message}`);
            await new Promise((r) => setTimeout(r, 200));
          }
        }
      }
    }
    try {
      await this.conn.end();
    } catch (e) {
      // closing is not part of the check
    }
  }
}

async function main() {
  const args = parseArgs(process.argv);
  const sessions = [];
  for (let i = 0; i < args.sessions; i++) sessions.push(new Session(args, i, args.shards[i % args.shards.length]));
  const deadline = Date.now() + args.seconds * 1000;
  await Promise.all(sessions.map((s) => s.main(deadline)));
  const longest = sessions.reduce((a, b) => (b.longest > a.longest ? b : a));
  const version = require(path.join(__dirname, '../node/node_modules/mysql2/package.json')).version;
  const sum = (k) => sessions.reduce((t, s) => t + s[k], 0);
  const report = {
    driver: `mysql2 ${version}`,
    sessions: sessions.length,
    statements: sum('statements'),
    errors: sum('errors'),
    reconnects: sum('reconnects'),
    state_failures: sum('stateFailures'),
    prepared_checked: true,
    longest_ms: Math.round(longest.longest * 10) / 10,
    longest_at: longest.longestAt,
    slow: sessions.flatMap((s) => s.slow),
    samples: sessions.flatMap((s) => s.samples).slice(0, 20),
    acked: sessions.flatMap((s) => s.acked),
  };
  fs.writeFileSync(args.out, JSON.stringify(report));
}

main().catch((e) => {
  console.error(e);
  process.exit(2);
});
