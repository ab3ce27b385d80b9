#!/usr/bin/env sysbench
-- sysbench sessions (one per thread) under load through `serve --takeover`
-- hand-offs, with server-side prepared statements.
--
--   sysbench integration/drivers/takeover/sysbench_load.lua --threads=21 --time=300 --events=0 --stop=/tmp/stop \
--     --db-driver=mysql --mysql-host=127.0.0.1 --mysql-port=6033 --mysql-user=app --mysql-password=app \
--     --mysql-db= --tag=tkl-123-sb --shards=14,3000 --out=/tmp/sb run
--
-- Each thread sets a user variable (@client), two session variables
-- (time_zone, sql_mode), a current database (USE dbNNNNN, its shard) and
-- prepares `SELECT data FROM pins WHERE id = ?` once (con:prepare,
-- COM_STMT_PREPARE; a fallback to emulated prepares fails the run), the ID
-- bound as an exact BIGINT. Every event, until the file --stop exists (or
-- --time passed): INSERT a row (every third inside
-- BEGIN ... COMMIT, read back in the transaction), `SELECT LAST_INSERT_ID()`,
-- the prepared point read of the row (one row), and `SELECT @client,
-- @@session.time_zone, @@session.sql_mode, DATABASE(), CONNECTION_ID()`,
-- which must answer what the thread set (a changed CONNECTION_ID() is a
-- reconnect). Every statement runs under pcall: a failed one is counted (not
-- ignored: no --mysql-ignore-errors), and a connection that fails is opened
-- again with con:reconnect() (a reconnect). Each thread writes OUT.<thread>.json
-- (the report pymysql_load.py writes) when it ends.

local ffi = require("ffi")

sysbench.cmdline.options = {
   tag = {"prefix of the rows and of @client", ""},
   shards = {"comma-separated shards; thread i uses shard i mod count", "14"},
   out = {"report path prefix: OUT.<thread>.json", ""},
   stop = {"the threads end once this file exists", ""},
}

pcall(ffi.cdef, [[
typedef struct { long tv_sec; long tv_nsec; } tkl_timespec;
int clock_gettime(int clk_id, tkl_timespec *tp);
]])
local ts = ffi.new("tkl_timespec")
local function clock(id)
   ffi.C.clock_gettime(id, ts)
   return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) / 1e9
end
local function now() return clock(1) end -- CLOCK_MONOTONIC
local function wall() return clock(0) end -- CLOCK_REALTIME
-- Statements at least this long are listed (start, ms) for the verdict.
local SLOW = 0.05

local SQL_MODE = "STRICT_ALL_TABLES,NO_ZERO_DATE"
local TIME_ZONE = "+03:00"
local STATE_SQL = "SELECT @client, @@session.time_zone, @@session.sql_mode, DATABASE(), CONNECTION_ID()"

-- A decimal string as an exact int64 (LuaJIT numbers are doubles: 53 bits).
local function int64(s)
   local v = ffi.new("int64_t", 0)
   for d in s:gmatch("%d") do
      v = v * 10 + tonumber(d)
   end
   return v
end

local t = {}

local function sample(text)
   if #t.samples < 5 then
      t.samples[#t.samples + 1] = t.name .. ": " .. tostring(text)
   end
end

-- Runs fn (one statement), timed; its result.
local function run(fn)
   local started = now()
   local ok, result = pcall(fn)
   local took = now() - started
   t.statements = t.statements + 1
   if took > t.longest then
      t.longest = took
      t.longest_at = os.time()
   end
   if took >= SLOW and #t.slow < 1000 then
      t.slow[#t.slow + 1] = string.format("[%.3f, %.1f]", wall() - took, took * 1000)
   end
   if not ok then
      error(result, 0)
   end
   return result
end

local function query_row(sql)
   local rs = run(function() return t.con:query(sql) end)
   if rs == nil or rs.nrows ~= 1 then
      if rs ~= nil then rs:free() end
      return nil
   end
   local row = rs:fetch_row()
   local copy = {}
   for i = 1, rs.nfields do
      copy[i] = row[i] == nil and "NULL" or tostring(row[i])
   end
   rs:free()
   return copy
end

local function setup()
   run(function() return t.con:query("USE " .. t.db) end)
   run(function() return t.con:query("SET @client = '" .. t.name .. "'") end)
   run(function() return t.con:query("SET SESSION time_zone = '" .. TIME_ZONE .. "'") end)
   run(function() return t.con:query("SET SESSION sql_mode = '" .. SQL_MODE .. "'") end)
   t.read = run(function() return t.con:prepare("SELECT data FROM pins WHERE id = ?") end)
   t.param = t.read:bind_create(sysbench.sql.type.BIGINT)
   t.read:bind_param(t.param)
   local got = query_row(STATE_SQL)
   if t.expected == nil then
      local want = {t.name, TIME_ZONE, SQL_MODE, t.db}
      for i = 1, 4 do
         if got == nil or got[i] ~= want[i] then
            t.state_failures = t.state_failures + 1
            sample("after setting it up: " .. table.concat(got or {"no row"}, " | "))
            break
         end
      end
      t.expected = got
   elseif got ~= nil then
      t.expected[5] = got[5]
   end
end

function thread_init()
   local shards = {}
   for s in sysbench.opt.shards:gmatch("%d+") do
      shards[#shards + 1] = tonumber(s)
   end
   local shard = shards[(sysbench.tid % #shards) + 1]
   t = {
      tid = sysbench.tid, shard = shard, db = string.format("db%05d", shard),
      name = sysbench.opt.tag .. "-s" .. sysbench.tid,
      statements = 0, errors = 0, reconnects = 0, state_failures = 0,
      longest = 0, longest_at = 0, slow = {}, samples = {}, acked = {}, n = 0,
   }
   t.con = sysbench.sql.driver():connect()
   local ok, err = pcall(setup)
   if not ok then
      t.errors = t.errors + 1
      sample("setting up: " .. tostring(err))
   end
end

-- sysbench 1.0 does not fetch the rows of a prepared statement's result
-- (only their count): the read must find exactly one row.
local function read_back(gid, where)
   local rs = run(function()
      t.param:set(int64(gid))
      return t.read:execute()
   end)
   local n = rs ~= nil and rs.nrows or 0
   if rs ~= nil then rs:free() end
   if n ~= 1 then
      t.state_failures = t.state_failures + 1
      sample(where .. ": id " .. gid .. " reads " .. n .. " rows, not 1")
   end
end

local function step()
   t.n = t.n + 1
   local data = t.name .. "-" .. t.n
   local insert = "INSERT INTO pins (data) VALUES ('" .. data .. "')"
   local gid
   if t.n % 3 == 0 then
      run(function() return t.con:query("BEGIN") end)
      run(function() return t.con:query(insert) end)
      gid = (query_row("SELECT LAST_INSERT_ID()") or {})[1]
      if gid ~= nil then read_back(gid, "in the transaction") end
      run(function() return t.con:query("COMMIT") end)
   else
      run(function() return t.con:query(insert) end)
      gid = (query_row("SELECT LAST_INSERT_ID()") or {})[1]
   end
   if gid == nil then
      t.state_failures = t.state_failures + 1
      sample("no LAST_INSERT_ID() after inserting " .. data)
      return
   end
   t.acked[#t.acked + 1] = string.format('[%d, "%s", "%s"]', t.shard, gid, data)
   read_back(gid, "prepared read")
   local got = query_row(STATE_SQL)
   local same = got ~= nil
   for i = 1, 5 do
      same = same and got[i] == t.expected[i]
   end
   if not same then
      if got ~= nil and got[5] ~= t.expected[5] then
         t.reconnects = t.reconnects + 1
         t.expected[5] = got[5]
      end
      t.state_failures = t.state_failures + 1
      sample("state " .. table.concat(got or {"no row"}, " | ") .. ", expected " .. table.concat(t.expected, " | "))
   end
end

function event()
   local ok, err = pcall(step)
   if not ok then
      t.errors = t.errors + 1
      sample("statement " .. t.n .. ": " .. tostring(type(err) == "table" and (err.errcode or err.query) or err))
      -- Never leave a transaction open (it would hold the session in the old process).
      pcall(function() t.con:query("ROLLBACK") end)
      -- A connection the server dropped: open it again and set it up (a reconnect).
      local alive = pcall(function() t.con:query("DO 1") end)
      if not alive then
         t.reconnects = t.reconnects + 1
         pcall(function() t.con:reconnect() end)
         local set, err2 = pcall(setup)
         if not set then
            t.errors = t.errors + 1
            sample("reconnect: " .. tostring(err2))
         end
      end
   end
end

-- sysbench's own loop, ending also when the stop file exists.
function thread_run(thread_id)
   while ffi.C.sb_more_events(thread_id) do
      local f = io.open(sysbench.opt.stop, "r")
      if f ~= nil then
         f:close()
         break
      end
      ffi.C.sb_event_start(thread_id)
      event()
      ffi.C.sb_event_stop(thread_id)
   end
end

local function json_string(s)
   return '"' .. tostring(s):gsub('[%c"\\]', function(c) return string.format("\\u%04x", c:byte()) end) .. '"'
end

function thread_done()
   local samples = {}
   for i, s in ipairs(t.samples) do
      samples[i] = json_string(s)
   end
   local f = assert(io.open(sysbench.opt.out .. "." .. t.tid .. ".json", "w"))
   f:write(string.format(
      '{"driver": "sysbench %s (libmariadb, prepared)", "sessions": 1, "statements": %d, "errors": %d, ' ..
      '"reconnects": %d, "state_failures": %d, "prepared_checked": true, "longest_ms": %.1f, ' ..
      '"longest_at": %d, "slow": [%s], "samples": [%s], "acked": [%s]}\n',
      sysbench.version, t.statements, t.errors, t.reconnects, t.state_failures, t.longest * 1000,
      t.longest_at, table.concat(t.slow, ", "), table.concat(samples, ", "), table.concat(t.acked, ", ")))
   f:close()
   t.con:disconnect()
end
