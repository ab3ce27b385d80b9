#!/usr/bin/env node
// mysql2 through shardgate: the driver conformance checks.
//
//   node integration/drivers/node/conformance.js --port 6033 \
//       [--host 127.0.0.1 --master-a 3307 --master-b 3308 --mod-host 3310 --seed N --only NAME]
//
// Every check runs twice: with execute() (server-side prepared statements:
// COM_STMT_PREPARE / COM_STMT_EXECUTE; mysql2 keeps a statement cache and
// sends 64-bit IDs as strings) and with query() (text protocol, parameters
// interpolated by the driver). Rows are then checked straight on the backend
// hosts (as shard/shardpw, with mysql2) to see where they landed.
//
// Connections use charset utf8mb4 and supportBigNumbers + bigNumberStrings,
// as an application handling 64-bit IDs must (IDs exceed 2^53). Every check
// runs even if an earlier one failed; the script prints "N passed, N failed"
// and exits 1 if any failed.
'use strict';

const crypto = require('node:crypto');
const mysql = require('mysql2/promise');

const SHARDS = 4096;
const TYPE_PIN = 1n;
const TYPE_BOARD = 2n;
const STORED_SMALL = 60 * 1024;
const LARGE = 2 * 1024 * 1024;
const UTF8_SAMPLE =
  'Grüße, “quotes” \'single\' "double" back\\slash — 中文 日本語 𝄞 🙂👍🏽👩‍💻 ñ';
const ERR_SINGLE_SHARD = 1105;
const ERR_LOCK_WAIT = 1205;
const WARN_DIV_ZERO = 1365;
const WARN_TRUNCATED = 1265;

// ------------------------------------------------------------ arguments

function parseArgs(argv) {
  const args = {
    host: '127.0.0.1',
    port: null,
    user: 'app',
    password: 'app',
    backendHost: '127.0.0.1',
    masterA: 3307,
    masterB: 3308,
    modHost: 3310,
    backendUser: 'shard',
    backendPassword: 'shardpw',
    seed: null,
    only: [],
  };
  const names = {
    '--host': 'host',
    '--port': 'port',
    '--user': 'user',
    '--password': 'password',
    '--backend-host': 'backendHost',
    '--master-a': 'masterA',
    '--master-b': 'masterB',
    '--mod-host': 'modHost',
    '--backend-user': 'backendUser',
    '--backend-password': 'backendPassword',
    '--seed': 'seed',
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--only') {
      args.only.push(argv[++i]);
    } else if (names[a]) {
      args[names[a]] = argv[++i];
    } else {
      throw new Error(`unknown argument ${a}`);
    }
  }
  if (args.port === null) throw new Error('--port (the proxy port) is required');
  for (const k of ['port', 'masterA', 'masterB', 'modHost']) args[k] = Number(args[k]);
  args.seed = args.seed === null ? Math.floor(Math.random() * 2 ** 31) : Number(args.seed);
  return args;
}

// ------------------------------------------------------------ helpers

class CheckFailed extends Error {}

function expect(cond, what) {
  if (!cond) throw new CheckFailed(what);
}

function show(v) {
  let s = typeof v === 'bigint' ? `${v}n` : JSON.stringify(v);
  if (s === undefined) s = String(v);
  return s.length > 300 ? `${s.slice(0, 300)}... (${s.length} chars)` : s;
}

function expectEq(got, want, what) {
  const g = show(got);
  const w = show(want);
  if (g !== w) throw new CheckFailed(`${what}: got ${g}, want ${w}`);
}

// A small deterministic PRNG (mulberry32) so a --seed reproduces the shards.
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function decodeId(gid) {
  const v = BigInt(String(gid));
  return {
    reserved: v >> 62n,
    shard: Number((v >> 46n) & 0xffffn),
    type: (v >> 36n) & 0x3ffn,
    local: v & ((1n << 36n) - 1n),
  };
}

function modShard(key) {
  const hex = crypto.createHash('md5').update(key, 'utf8').digest('hex');
  return Number(BigInt('0x' + hex) % BigInt(SHARDS));
}

const shardDb = (n) => `db${String(n).padStart(5, '0')}`;
const modDb = (n) => `msdb${String(n).padStart(5, '0')}`;

function bigText(nBytes, seed) {
  const r = rng(seed);
  const alphabet = ['a', 'Z', '0', ' ', "'", '\\', '"', 'é', 'ß', '—', '中', '€', '🙂', '𝄞', '\n', '\t'];
  const parts = [];
  let size = 0;
  for (;;) {
    const ch = alphabet[Math.floor(r() * alphabet.length)];
    const b = Buffer.byteLength(ch, 'utf8');
    if (size + b > nBytes) break;
    parts.push(ch);
    size += b;
  }
  parts.push('x'.repeat(nBytes - size));
  const text = parts.join('');
  if (Buffer.byteLength(text, 'utf8') !== nBytes) throw new Error('bigText size');
  return text;
}

class Env {
  constructor(args, salt) {
    Object.assign(this, args);
    let h = args.seed;
    for (const c of salt) h = (Math.imul(h, 31) + c.charCodeAt(0)) >>> 0;
    this.random = rng(h);
  }
  masterOf(shard) {
    return shard < 2048 ? this.masterA : this.masterB;
  }
  shardOnA() {
    return Math.floor(this.random() * 2048);
  }
  shardOnB() {
    return 2048 + Math.floor(this.random() * 2048);
  }
  marker(what) {
    return JSON.stringify({ driver_test: what, r: Math.floor(this.random() * 2 ** 30) });
  }
}

function baseOptions(host, port, user, password, extra) {
  return {
    host,
    port,
    user,
    password,
    charset: 'utf8mb4',
    supportBigNumbers: true,
    bigNumberStrings: true,
    connectTimeout: 10000,
    ...extra,
  };
}

// A proxy connection; `drv.mode` decides execute() or query().
class Session {
  constructor(env, drv, conn) {
    this.env = env;
    this.drv = drv;
    this.conn = conn;
  }
  static async open(env, drv, extra = {}) {
    const conn = await mysql.createConnection(baseOptions(env.host, env.port, env.user, env.password, extra));
    return new Session(env, drv, conn);
  }
  // [rows or ResultSetHeader, fields]
  async run(sql, params) {
    if (this.drv.mode === 'execute') return this.conn.execute(sql, params || []);
    return this.conn.query(sql, params);
  }
  // A statement sent as plain text whatever the mode (SETs, BEGIN, COMMIT).
  async text(sql) {
    return this.conn.query(sql);
  }
  async rows(sql, params) {
    const [rows] = await this.run(sql, params);
    return rows;
  }
  // The first column of the only row, whatever the column is named.
  async value(sql, params) {
    return Object.values(await this.one(sql, params))[0];
  }
  async one(sql, params) {
    const rows = await this.rows(sql, params);
    expectEq(rows.length, 1, `row count of ${show(sql)}`);
    return rows[0];
  }
  async insert(table, shard, data) {
    const [res] = await this.run(`INSERT /*+ SHARD(${shard}) */ INTO ${table} (data) VALUES (?)`, [data]);
    expect(res.insertId !== undefined && res.insertId !== null && BigInt(String(res.insertId)) > 0n,
      `insertId after an INSERT into shard ${shard}: ${show(res.insertId)}`);
    expect(typeof res.insertId === 'string' || BigInt(String(res.insertId)) < 2n ** 53n,
      `insertId ${show(res.insertId)} lost precision`);
    return String(res.insertId);
  }
  async expectError(sql, params, code, what) {
    try {
      await this.run(sql, params);
    } catch (err) {
      if (err.errno === undefined || err.errno >= 2000 || err.fatal) {
        throw new CheckFailed(`${what}: expected server error ${code}, got ${err.code || ''} ${err.errno}: ${err.message}`);
      }
      expectEq(err.errno, code, `${what}: error code (message ${show(err.sqlMessage)})`);
      return err.sqlMessage;
    }
    throw new CheckFailed(`${what}: expected error ${code}, the statement succeeded`);
  }
  async showWarnings() {
    const [rows] = await this.conn.query('SHOW WARNINGS');
    return rows.map((r) => [r.Level, Number(r.Code), r.Message]);
  }
  async close() {
    try {
      await this.conn.end();
    } catch (_) {
      this.conn.destroy();
    }
  }
}

async function onHost(env, port, sql, params) {
  const conn = await mysql.createConnection(
    baseOptions(env.backendHost, port, env.backendUser, env.backendPassword, {}));
  try {
    const [rows] = await conn.query(sql, params);
    return rows;
  } finally {
    await conn.end();
  }
}

// `data` of an object row on the master that owns its shard (or null); the
// shard database must not exist on the other main master.
async function storedData(env, table, gid) {
  const f = decodeId(gid);
  const port = env.masterOf(f.shard);
  const rows = await onHost(env, port,
    `SELECT data FROM ${shardDb(f.shard)}.${table} WHERE local_id = ?`, [String(f.local)]);
  const other = port === env.masterA ? env.masterB : env.masterA;
  const elsewhere = await onHost(env, other,
    'SELECT COUNT(*) AS n FROM information_schema.schemata WHERE schema_name = ?', [shardDb(f.shard)]);
  expectEq(Number(elsewhere[0].n), 0, `database ${shardDb(f.shard)} must exist only on its master ${port}, but host ${other} has it`);
  return rows.length ? rows[0].data : null;
}

function expectId(gid, shard, type, what) {
  const f = decodeId(gid);
  expectEq([Number(f.reserved), f.shard, Number(f.type)], [0, shard, Number(type)],
    `${what}: (reserved, shard, type) decoded from id ${gid}`);
  expect(f.local > 0n, `${what}: local id of ${gid} is 0`);
}

async function expectShowWarnings(s, code, what) {
  const warnings = await s.showWarnings();
  expect(warnings.some((w) => w[1] === code),
    `SHOW WARNINGS right after ${what} must list warning ${code}; it returned ${show(warnings)}`);
}

// ------------------------------------------------------------ checks

async function checkConnectUtf8mb4(env, drv) {
  const s = await Session.open(env, drv);
  try {
    const row = await s.one('SELECT @@character_set_client AS c, @@character_set_connection AS n, @@character_set_results AS r');
    expectEq([row.c, row.n, row.r], ['utf8mb4', 'utf8mb4', 'utf8mb4'], 'character sets after connecting with charset utf8mb4');
    expectEq(Number((await s.one('SELECT 1 AS one')).one), 1, 'SELECT 1');
    const version = (await s.one('SELECT @@version AS v')).v;
    expect(typeof version === 'string' && version.length > 0, `SELECT @@version answered ${show(version)}`);
    expectEq(await s.value('SELECT DATABASE()'), null, 'SELECT DATABASE() with no database');
    // Aliases name the columns (mysql2 keys rows by column name).
    for (const sql of ['SELECT DATABASE() AS d', 'SELECT LAST_INSERT_ID() AS d', 'SELECT @@version AS d']) {
      const [, fields] = await s.run(sql);
      expectEq(fields.map((f) => f.name), ['d'], `column names of ${sql}`);
    }
    expectEq((await s.one('SELECT ? AS v', ['héllo 🙂'])).v, 'héllo 🙂', 'a utf8mb4 string echoed');
    await s.conn.ping();
  } finally {
    await s.close();
  }
}

async function checkInsertByHintAndReadBack(env, drv) {
  const s = await Session.open(env, drv);
  try {
    for (const shard of [env.shardOnA(), env.shardOnB()]) {
      const data = env.marker(`hint-${shard}`);
      const gid = await s.insert('pins', shard, data);
      expectId(gid, shard, TYPE_PIN, `insertId of INSERT /*+ SHARD(${shard}) */ INTO pins`);
      expectEq(String(await s.value('SELECT LAST_INSERT_ID()')), gid, 'SELECT LAST_INSERT_ID() after the insert');
      const row = await s.one('SELECT id, data FROM pins WHERE id = ?', [gid]);
      expectEq([String(row.id), row.data], [gid, data], `SELECT id, data FROM pins WHERE id = ${gid}`);
      expectEq(await storedData(env, 'pins', gid), data, `row ${gid} on host ${env.masterOf(shard)} in ${shardDb(shard)}.pins`);
      const data2 = env.marker(`colocate-${shard}`);
      const [res] = await s.run(`INSERT /*+ COLOCATE(${gid}) */ INTO pins (data) VALUES (?)`, [data2]);
      const gid2 = String(res.insertId);
      expectId(gid2, shard, TYPE_PIN, `insertId of INSERT /*+ COLOCATE(${gid}) */`);
      expectEq(await storedData(env, 'pins', gid2), data2, `COLOCATE row ${gid2} on its host`);
    }
  } finally {
    await s.close();
  }
}

async function checkIdsBoundAsParameters(env, drv) {
  const s = await Session.open(env, drv);
  try {
    const shard = env.shardOnB();
    const a = await s.insert('pins', shard, env.marker('param-a'));
    const b = await s.insert('pins', shard, env.marker('param-b'));
    // As a string (what mysql2 sends for 64-bit values) and as a BigInt.
    expectEq(String((await s.one('SELECT id FROM pins WHERE id = ?', [a])).id), a, 'id bound as a decimal string');
    expectEq(String((await s.one('SELECT id FROM pins WHERE id = ?', [BigInt(a)])).id), a, 'id bound as a BigInt');
    const got = (await s.rows('SELECT id FROM pins WHERE id IN (?, ?)', [a, b])).map((r) => String(r.id)).sort();
    expectEq(got, [a, b].sort(), 'id IN (?, ?) of one shard, both bound');
    const updated = env.marker('param-updated');
    const [res] = await s.run('UPDATE pins SET data = ? WHERE id = ?', [updated, b]);
    expectEq(Number(res.affectedRows), 1, 'rows changed by UPDATE ... WHERE id = <bound id>');
    expectEq(await storedData(env, 'pins', b), updated, `updated row ${b} on its host`);
    // A mapping row lives on its board's shard.
    const boardShard = env.shardOnA();
    const board = await s.insert('boards', boardShard, env.marker('board'));
    expectId(board, boardShard, TYPE_BOARD, 'insertId of an INSERT into boards');
    await s.run('INSERT INTO board_has_pins (board_id, pin_id, sequence) VALUES (?, ?, ?)', [board, a, 7]);
    const rows = await s.rows('SELECT pin_id, sequence FROM board_has_pins WHERE board_id = ?', [board]);
    expectEq(rows.map((r) => [String(r.pin_id), Number(r.sequence)]), [[a, 7]], 'board_has_pins read back by bound board_id');
    const direct = await onHost(env, env.masterOf(boardShard),
      `SELECT pin_id FROM ${shardDb(boardShard)}.board_has_pins WHERE board_id = ?`, [board]);
    expectEq(direct.map((r) => String(r.pin_id)), [a], `board_has_pins row on host ${env.masterOf(boardShard)} in ${shardDb(boardShard)}`);
    // Mod-shard table: md5(email) % 4096 on the mod host.
    const email = `drv-${crypto.randomUUID()}@example.com`;
    await s.run('INSERT INTO user_by_email (email, user_id) VALUES (?, ?)', [email, a]);
    const back = await s.rows('SELECT user_id FROM user_by_email WHERE email = ?', [email]);
    expectEq(back.map((r) => String(r.user_id)), [a], 'user_by_email read back by bound email');
    const ms = modShard(email);
    const onMod = await onHost(env, env.modHost, `SELECT user_id FROM ${modDb(ms)}.user_by_email WHERE email = ?`, [email]);
    expectEq(onMod.map((r) => String(r.user_id)), [a], `user_by_email row on mod host ${env.modHost} in ${modDb(ms)}`);
  } finally {
    await s.close();
  }
}

async function checkAutocommitOffReadsManyShards(env, drv) {
  const setup = await Session.open(env, drv);
  const shards = [env.shardOnA(), env.shardOnA(), env.shardOnB(), env.shardOnB()];
  const rows = new Map();
  try {
    for (const sh of shards) {
      const data = env.marker(`many-${sh}`);
      rows.set(await setup.insert('pins', sh, data), data);
    }
  } finally {
    await setup.close();
  }
  const s = await Session.open(env, drv);
  try {
    await s.text('SET autocommit = 0');
    for (const [gid, data] of rows) {
      expectEq((await s.one('SELECT data FROM pins WHERE id = ?', [gid])).data, data,
        `read of shard ${decodeId(gid).shard} with autocommit off`);
    }
    const a = shards[0];
    const data = env.marker('bound-write');
    const gid = await s.insert('pins', a, data);
    for (const [other, odata] of rows) {
      expectEq((await s.one('SELECT data FROM pins WHERE id = ?', [other])).data, odata,
        `plain read of shard ${decodeId(other).shard} inside a transaction bound to shard ${a}`);
    }
    expectEq((await s.one('SELECT data FROM pins WHERE id = ?', [gid])).data, data, 'the transaction reads its own uncommitted write');
    expectEq(await storedData(env, 'pins', gid), null, 'the write is invisible on the host before COMMIT');
    await s.conn.commit();
    expectEq(await storedData(env, 'pins', gid), data, 'the write is on the host after COMMIT');
    const gidB = await s.insert('pins', shards[2], env.marker('rolled-back'));
    await s.conn.rollback();
    expectEq(await storedData(env, 'pins', gidB), null, 'a rolled back write is not on the host');
  } finally {
    await s.close();
  }
}

async function checkForUpdateReadModifyWrite(env, drv) {
  const setup = await Session.open(env, drv);
  let gid;
  try {
    gid = await setup.insert('pins', env.shardOnB(), '{"n":0}');
  } finally {
    await setup.close();
  }
  const s = await Session.open(env, drv);
  const other = await Session.open(env, drv);
  try {
    await other.text('SET SESSION innodb_lock_wait_timeout = 1');
    for (let i = 0; i < 3; i++) {
      await s.conn.beginTransaction();
      const cur = (await s.one('SELECT data FROM pins WHERE id = ? FOR UPDATE', [gid])).data;
      expectEq(cur, `{"n":${i}}`, `value read FOR UPDATE in round ${i}`);
      if (i === 0) {
        const msg = await other.expectError('SELECT data FROM pins WHERE id = ? FOR UPDATE', [gid], ERR_LOCK_WAIT,
          "a second locking read of a row locked by another session's FOR UPDATE");
        expect(/lock/i.test(msg), `lock wait timeout message: ${show(msg)}`);
      }
      const [res] = await s.run('UPDATE pins SET data = ? WHERE id = ?', [`{"n":${i + 1}}`, gid]);
      expectEq(Number(res.affectedRows), 1, 'UPDATE after SELECT ... FOR UPDATE');
      expectEq((await other.one('SELECT data FROM pins WHERE id = ?', [gid])).data, `{"n":${i}}`,
        'another session sees the committed value before COMMIT');
      await s.conn.commit();
    }
    expectEq((await other.one('SELECT data FROM pins WHERE id = ?', [gid])).data, '{"n":3}', 'value after three read-modify-write transactions');
    expectEq(await storedData(env, 'pins', gid), '{"n":3}', 'value on the host');
  } finally {
    await s.close();
    await other.close();
  }
}

async function checkCrossShardErrorInTransaction(env, drv) {
  const a = env.shardOnA();
  const b = env.shardOnB();
  let c = env.shardOnA();
  while (c === a) c = env.shardOnA();
  const setup = await Session.open(env, drv);
  let onB;
  let onC;
  try {
    onB = await setup.insert('pins', b, env.marker('cross-b'));
    onC = await setup.insert('pins', c, env.marker('cross-c'));
  } finally {
    await setup.close();
  }
  const s = await Session.open(env, drv);
  try {
    await s.conn.beginTransaction();
    const first = await s.insert('pins', a, env.marker('cross-first'));
    const attempts = [
      [`INSERT /*+ SHARD(${b}) */ INTO pins (data) VALUES (?)`, ['x'], 'an INSERT', b],
      ['UPDATE pins SET data = ? WHERE id = ?', ['x', onB], 'an UPDATE', b],
      ['SELECT data FROM pins WHERE id = ? FOR UPDATE', [onC], 'a locking read (same host, other shard)', c],
    ];
    for (const [sql, params, what, shard] of attempts) {
      const msg = await s.expectError(sql, params, ERR_SINGLE_SHARD,
        `${what} for shard ${shard} inside a transaction bound to shard ${a}`);
      expect(msg.startsWith('shardgate:'), `the error message starts with 'shardgate:': ${show(msg)}`);
      expect(msg.includes('single-shard') || msg.includes('bound'), `the error says transactions are single-shard / bound: ${show(msg)}`);
      expect(msg.includes(String(a)) && msg.includes(String(shard)), `the error names shards ${a} and ${shard}: ${show(msg)}`);
    }
    expectEq((await s.rows('SELECT id FROM pins WHERE id = ?', [first])).length, 1, 'the transaction is still open after the refused statements');
    expectEq((await s.rows('SELECT id FROM pins WHERE id = ?', [onB])).length, 1, 'a plain read of another shard inside the transaction');
    await s.conn.rollback();
    expectEq(await storedData(env, 'pins', first), null, 'the bound write is gone after ROLLBACK');
    expectEq(Number((await s.one('SELECT 1 AS one')).one), 1, 'SELECT 1 after ROLLBACK');
    const data = env.marker('after-rollback');
    await s.conn.beginTransaction();
    const gid = await s.insert('pins', b, data);
    await s.conn.commit();
    expectEq(await storedData(env, 'pins', gid), data, 'a write after the ROLLBACK lands on its host');
  } finally {
    await s.close();
  }
}

async function checkUtf8TextWithEmoji(env, drv) {
  const s = await Session.open(env, drv);
  try {
    const shard = env.shardOnA();
    const gid = await s.insert('pins', shard, UTF8_SAMPLE);
    expectEq((await s.one('SELECT data FROM pins WHERE id = ?', [gid])).data, UTF8_SAMPLE, 'UTF-8 text read back through the proxy');
    const f = decodeId(gid);
    const rows = await onHost(env, env.masterOf(shard),
      `SELECT HEX(data) AS h FROM ${shardDb(shard)}.pins WHERE local_id = ?`, [String(f.local)]);
    expectEq(rows[0].h, Buffer.from(UTF8_SAMPLE, 'utf8').toString('hex').toUpperCase(), 'the stored bytes on the host (HEX(data))');
    const got = await s.one('SELECT CHAR_LENGTH(data) AS c, LENGTH(data) AS l FROM pins WHERE id = ?', [gid]);
    expectEq([Number(got.c), Number(got.l)], [[...UTF8_SAMPLE].length, Buffer.byteLength(UTF8_SAMPLE, 'utf8')],
      'CHAR_LENGTH and LENGTH of the stored text');
  } finally {
    await s.close();
  }
}

async function checkLargeValuesByteExact(env, drv) {
  const s = await Session.open(env, drv);
  try {
    let value = bigText(LARGE, 2);
    let got = (await s.one('SELECT ? AS v', [value])).v;
    expectEq(Buffer.byteLength(got, 'utf8'), LARGE, 'byte length of a 2 MiB value echoed by SELECT');
    expect(got === value, 'a 2 MiB value echoed by SELECT differs from what was sent');
    const shard = env.shardOnB();
    const cap = await onHost(env, env.masterOf(shard),
      "SELECT CHARACTER_OCTET_LENGTH AS n FROM information_schema.columns WHERE table_schema = ? AND table_name = 'pins' AND column_name = 'data'",
      [shardDb(shard)]);
    expectEq(cap.length, 1, `column ${shardDb(shard)}.pins.data on host ${env.masterOf(shard)}`);
    const capacity = Number(cap[0].n);
    const size = capacity >= LARGE ? LARGE : STORED_SMALL;
    if (size !== LARGE) {
      console.log(`    note: pins.data holds ${capacity} bytes (TEXT), so the stored value is ${size} bytes; a 2 MiB stored value needs MEDIUMTEXT in config/schema.sql`);
    }
    value = bigText(size, 3);
    const gid = await s.insert('pins', shard, value);
    got = (await s.one('SELECT data FROM pins WHERE id = ?', [gid])).data;
    expectEq(Buffer.byteLength(got, 'utf8'), size, `byte length of the stored ${size}-byte value read back`);
    expect(got === value, `the stored ${size}-byte value read back through the proxy differs`);
    expect((await storedData(env, 'pins', gid)) === value, `the ${size}-byte value on host ${env.masterOf(shard)} differs from what was sent`);
  } finally {
    await s.close();
  }
}

async function checkWarnings(env, drv) {
  for (const autocommit of [true, false]) {
    const mode = autocommit ? 'autocommit on' : 'autocommit off';
    const s = await Session.open(env, drv);
    try {
      if (!autocommit) await s.text('SET autocommit = 0');
      const shard = env.shardOnB();
      const gid = await s.insert('pins', shard, env.marker('warn'));
      if (!autocommit) await s.conn.commit();
      // mysql2 does not expose the count of a result set's final packet:
      // SHOW WARNINGS must list the previous statement's warning.
      await s.rows('SELECT id, 1/0 AS z FROM pins WHERE id = ?', [gid]);
      await expectShowWarnings(s, WARN_DIV_ZERO, `SELECT id, 1/0 FROM pins WHERE id = ${gid} (shard ${shard}, ${mode}, first after the insert)`);
      await s.rows('SELECT 1/0 AS z');
      await expectShowWarnings(s, WARN_DIV_ZERO, `SELECT 1/0 (no table, ${mode})`);
      await s.rows('SELECT id, 1/0 AS z FROM pins WHERE id = ?', [gid]);
      await expectShowWarnings(s, WARN_DIV_ZERO, `SELECT id, 1/0 FROM pins WHERE id = ${gid} (shard ${shard}, ${mode})`);
      // A write with a warning: the driver reads the OK packet's count.
      const [res] = await s.run(`INSERT IGNORE /*+ SHARD(${shard}) */ INTO pins (data, ts) VALUES (?, ?)`,
        ['warn-ts', '2020-02-30 00:00:00']);
      expectEq(res.warningStatus, 1, `warningStatus of INSERT IGNORE with an invalid date into shard ${shard} (${mode})`);
      await expectShowWarnings(s, WARN_TRUNCATED, `INSERT IGNORE with an invalid date (${mode})`);
      expectId(String(res.insertId), shard, TYPE_PIN, 'insertId of the INSERT IGNORE');
      if (!autocommit) await s.conn.commit();
      expectEq(await storedData(env, 'pins', String(res.insertId)), 'warn-ts', 'the INSERT IGNORE row on its host');
    } finally {
      await s.close();
    }
  }
}

async function checkUseShardDatabase(env, drv) {
  const shard = env.shardOnA();
  const setup = await Session.open(env, drv);
  const data = env.marker('use');
  let gid;
  try {
    gid = await setup.insert('pins', shard, data);
  } finally {
    await setup.close();
  }
  // The database named in the handshake.
  let s = await Session.open(env, drv, { database: shardDb(shard) });
  try {
    expectEq(await s.value('SELECT DATABASE()'), shardDb(shard), 'DATABASE() after connecting with it');
    expectEq((await s.one('SELECT data FROM pins WHERE local_id = ?', [String(decodeId(gid).local)])).data, data,
      "an unqualified read in the connection's shard database");
  } finally {
    await s.close();
  }
  // USE dbNNNNN (text), then unqualified statements.
  const other = env.shardOnB();
  s = await Session.open(env, drv);
  try {
    await s.text(`USE ${shardDb(other)}`);
    expectEq(await s.value('SELECT DATABASE()'), shardDb(other), 'DATABASE() after USE');
    const [res] = await s.run('INSERT INTO pins (data) VALUES (?)', ['in-use']);
    const gid2 = String(res.insertId);
    expectId(gid2, other, TYPE_PIN, `insertId of an unqualified INSERT after USE ${shardDb(other)}`);
    expectEq(await storedData(env, 'pins', gid2), 'in-use', 'the row on its host');
  } finally {
    await s.close();
  }
}

async function checkChangeUser(env, drv) {
  // mysql2's changeUser sends COM_CHANGE_USER (here with a database).
  const other = env.shardOnB();
  let s = await Session.open(env, drv);
  try {
    await s.text("SET @cu_marker = 'before'");
    await s.conn.changeUser({ user: env.user, password: env.password, database: shardDb(other) });
    expectEq(await s.value('SELECT DATABASE()'), shardDb(other), 'DATABASE() after changeUser({database})');
    expectEq(await s.value('SELECT @cu_marker'), null, 'a user variable set before changeUser, read after it');
    const [res] = await s.run('INSERT INTO pins (data) VALUES (?)', ['after-change-user']);
    expectId(String(res.insertId), other, TYPE_PIN, `insertId of an unqualified INSERT in ${shardDb(other)} after changeUser`);
  } finally {
    await s.close();
  }
  s = await Session.open(env, drv);
  try {
    let refused = null;
    try {
      await s.conn.changeUser({ user: env.user, password: `${env.password}-wrong` });
    } catch (err) {
      refused = err;
    }
    expect(refused !== null, 'changeUser with a wrong password was accepted');
    expectEq(refused.errno, 1045, `changeUser with a wrong password: error code (message ${show(refused.message)})`);
  } finally {
    await s.close();
  }
}

async function checkSessionSettings(env, drv) {
  const s = await Session.open(env, drv);
  try {
    for (const stmt of ["SET NAMES utf8mb4", "SET time_zone = '+05:30'", "SET sql_mode = 'STRICT_ALL_TABLES'",
      "SET @driver_marker = 'm-42'", 'SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED']) {
      await s.text(stmt);
    }
    const want = ['+05:30', 'STRICT_ALL_TABLES', 'm-42', 'READ-COMMITTED'];
    const pick = (r) => [r.tz, r.sm, r.m, r.iso];
    const got = await s.one('SELECT @@session.time_zone AS tz, @@session.sql_mode AS sm, @driver_marker AS m, @@session.tx_isolation AS iso');
    expectEq(pick(got), want, 'session settings read back (no table)');
    for (const shard of [env.shardOnA(), env.shardOnB()]) {
      const gid = await s.insert('pins', shard, 'settings');
      const row = await s.one('SELECT id, @@session.time_zone AS tz, @@session.sql_mode AS sm, @driver_marker AS m, ' +
        '@@session.tx_isolation AS iso FROM pins WHERE id = ?', [gid]);
      expectEq(pick(row), want, `session settings on the backend connection serving shard ${shard}`);
    }
  } finally {
    await s.close();
  }
}

async function checkResetConnection(env, drv) {
  const s = await Session.open(env, drv);
  try {
    const shard = env.shardOnA();
    const gid = await s.insert('pins', shard, 'reset');
    await s.text("SET @reset_marker = 'before'");
    await s.text("SET time_zone = '+03:00'");
    let row = await s.one('SELECT id, @reset_marker AS m, @@session.time_zone AS tz FROM pins WHERE id = ?', [gid]);
    expectEq([row.m, row.tz], ['before', '+03:00'], 'settings before the reset');
    await s.conn.reset(); // COM_RESET_CONNECTION
    row = await s.one('SELECT @reset_marker AS m, @@session.time_zone AS tz');
    expectEq([row.m, row.tz], [null, 'SYSTEM'], 'user variable and time_zone after COM_RESET_CONNECTION');
    row = await s.one('SELECT id, @reset_marker AS m, @@session.time_zone AS tz FROM pins WHERE id = ?', [gid]);
    expectEq([row.m, row.tz], [null, 'SYSTEM'], `user variable and time_zone on the backend serving shard ${shard} after the reset`);
  } finally {
    await s.close();
  }
}

const CHECKS = [
  ['connect_utf8mb4', checkConnectUtf8mb4],
  ['insert_by_hint_and_read_back', checkInsertByHintAndReadBack],
  ['ids_bound_as_parameters', checkIdsBoundAsParameters],
  ['autocommit_off_reads_many_shards', checkAutocommitOffReadsManyShards],
  ['for_update_read_modify_write', checkForUpdateReadModifyWrite],
  ['cross_shard_error_in_transaction', checkCrossShardErrorInTransaction],
  ['utf8_text_with_emoji', checkUtf8TextWithEmoji],
  ['large_values_byte_exact', checkLargeValuesByteExact],
  ['warnings', checkWarnings],
  ['use_shard_database', checkUseShardDatabase],
  ['session_settings', checkSessionSettings],
  ['reset_connection', checkResetConnection],
  ['change_user', checkChangeUser],
];

async function main() {
  const args = parseArgs(process.argv.slice(2));
  console.log(`proxy ${args.host}:${args.port}; hosts A=${args.masterA} B=${args.masterB} mod=${args.modHost}; seed ${args.seed}; mysql2 ${require('mysql2/package.json').version}`);
  let passed = 0;
  const failed = [];
  for (const drv of [{ name: 'mysql2-execute', mode: 'execute' }, { name: 'mysql2-query', mode: 'query' }]) {
    const env = new Env(args, drv.name);
    for (const [name, fn] of CHECKS) {
      if (args.only.length && !args.only.some((o) => name.includes(o))) continue;
      const label = `${drv.name} ${name}`;
      const start = Date.now();
      try {
        await fn(env, drv);
        passed++;
        console.log(`ok   ${label} (${((Date.now() - start) / 1000).toFixed(2)}s)`);
      } catch (err) {
        const kind = err instanceof CheckFailed ? 'CheckFailed' : err.code || err.name || 'Error';
        const at = (err.stack || '').split('\n').find((l) => /at (async )?check\w+ /.test(l));
        console.log(`FAIL ${label}: ${kind}: ${err.message}${at ? ` (${at.trim()})` : ''}`);
        failed.push(label);
      }
    }
  }
  console.log('');
  if (failed.length) {
    console.log('failed checks:');
    for (const f of failed) console.log(`  ${f}`);
  }
  console.log(`${passed} passed, ${failed.length} failed`);
  process.exit(failed.length ? 1 : 0);
}

main().catch((err) => {
  console.error(err);
  process.exit(2);
});
