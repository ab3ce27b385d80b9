#!/usr/bin/env sysbench
-- Point lookups by global 64-bit ID: through shardgate vs straight to the master.
--
-- Driven by integration/bench/point_select.sh, which seeds the rows and writes
-- the ID file (one line per row: "global_id shard local_id"). Every event picks
-- a row uniformly at random (sysbench's per-thread RNG, so a fixed --rand-seed
-- gives the same row sequence in both modes) and runs one text-protocol query:
--
--   --mode=proxy   SELECT data FROM pins WHERE id = <global_id>
--   --mode=direct  SELECT data FROM dbNNNNN.pins WHERE local_id = <local_id>
--
-- The query strings are built once per thread in thread_init, so the Lua work
-- per event is identical in both modes. A result that is not exactly one row
-- is counted and reported as "bench-errors: N" per thread at the end (the
-- harness requires one report per thread, all zero).
--
-- With --ps=on (BENCH_PS=1 in point_select.sh; run with --db-ps-mode=auto)
-- each event executes a server-side prepared statement (COM_STMT_EXECUTE,
-- binary protocol) instead, with the ID bound as a BIGINT:
--
--   --mode=proxy   SELECT data FROM pins WHERE id = ?             (global ID)
--   --mode=direct  SELECT data FROM dbNNNNN.pins WHERE local_id = ? (local ID)
--
-- Through the proxy one statement is prepared per thread in thread_init. A
-- MariaDB statement names its database, so direct mode prepares one statement
-- per shard per thread, lazily at the first event that needs it (64 shards x
-- 32 threads = 2,048, well under max_prepared_stmt_count = 16,382). The row
-- sequence is the same as in text mode (same RNG calls). Each thread also
-- reports "bench-prepared: N", the statements it prepared.

sysbench.cmdline.options = {
   mode = {"proxy (SELECT ... WHERE id = global) or direct (dbNNNNN.pins WHERE local_id)", "proxy"},
   ids = {"ID file: one 'global_id shard local_id' line per row", ""},
   db_format = {"shard database name format (direct mode)", "db%05d"},
   ps = {"on: server-side prepared statements (COM_STMT_EXECUTE); off: text queries", "off"},
}

local ffi = require("ffi")

local queries
local nq
local con
local bad = 0

local function load_queries()
   local mode = sysbench.opt.mode
   if mode ~= "proxy" and mode ~= "direct" then
      error("--mode must be proxy or direct, got " .. tostring(mode))
   end
   local path = sysbench.opt.ids
   local f = assert(io.open(path, "r"), "cannot open ID file '" .. path .. "'")
   local q = {}
   for line in f:lines() do
      -- Keep the IDs as strings: LuaJIT numbers are doubles (53 bits).
      local gid, shard, lid = line:match("^(%d+)%s+(%d+)%s+(%d+)")
      if gid then
         if mode == "proxy" then
            q[#q + 1] = "SELECT data FROM pins WHERE id = " .. gid
         else
            q[#q + 1] = "SELECT data FROM " ..
               string.format(sysbench.opt.db_format, tonumber(shard)) ..
               ".pins WHERE local_id = " .. lid
         end
      end
   end
   f:close()
   assert(#q > 0, "no rows in ID file '" .. path .. "'")
   return q, #q
end

-- A decimal string as an exact int64 (LuaJIT numbers are doubles: 53 bits).
local function int64(str)
   local v = ffi.new("int64_t", 0)
   for d in str:gmatch("%d") do
      v = v * 10 + tonumber(d)
   end
   return v
end

-- Prepared mode: per row, the value to bind and (direct) the shard.
local ps_ids, ps_shards
local stmt, param          -- proxy: the one statement of this thread
local shard_stmts = {}     -- direct: shard -> {stmt, param}, prepared lazily
local nprepared = 0

local function load_ps_rows()
   local mode = sysbench.opt.mode
   if mode ~= "proxy" and mode ~= "direct" then
      error("--mode must be proxy or direct, got " .. tostring(mode))
   end
   local path = sysbench.opt.ids
   local f = assert(io.open(path, "r"), "cannot open ID file '" .. path .. "'")
   local ids, shards = {}, {}
   for line in f:lines() do
      local gid, shard, lid = line:match("^(%d+)%s+(%d+)%s+(%d+)")
      if gid then
         if mode == "proxy" then
            local v = int64(gid)
            assert((tostring(v):gsub("LL$", "")) == gid, "int64 conversion of " .. gid)
            ids[#ids + 1] = v
         else
            ids[#ids + 1] = tonumber(lid)
            shards[#shards + 1] = tonumber(shard)
         end
      end
   end
   f:close()
   assert(#ids > 0, "no rows in ID file '" .. path .. "'")
   return ids, shards, #ids
end

local function prepare(sql)
   local st = con:prepare(sql)
   local p = st:bind_create(sysbench.sql.type.BIGINT)
   st:bind_param(p)
   nprepared = nprepared + 1
   return st, p
end

local function shard_stmt(shard)
   local e = shard_stmts[shard]
   if e == nil then
      local st, p = prepare("SELECT data FROM " ..
         string.format(sysbench.opt.db_format, shard) .. ".pins WHERE local_id = ?")
      e = {st, p}
      shard_stmts[shard] = e
   end
   return e
end

local function check(rs)
   if rs == nil or rs.nrows ~= 1 then
      bad = bad + 1
   end
   if rs ~= nil then
      rs:free()
   end
end

-- 0: text queries, 1: prepared through the proxy, 2: prepared direct.
local kind

function thread_init()
   local ps = sysbench.opt.ps
   if ps ~= "on" and ps ~= "off" then
      error("--ps must be on or off, got " .. tostring(ps))
   end
   if ps == "off" then
      kind = 0
      queries, nq = load_queries()
      con = sysbench.sql.driver():connect()
   else
      kind = sysbench.opt.mode == "proxy" and 1 or 2
      ps_ids, ps_shards, nq = load_ps_rows()
      con = sysbench.sql.driver():connect()
      if kind == 1 then
         stmt, param = prepare("SELECT data FROM pins WHERE id = ?")
      end
   end
end

function event()
   if kind == 0 then
      check(con:query(queries[sysbench.rand.uniform(1, nq)]))
   elseif kind == 1 then
      param:set(ps_ids[sysbench.rand.uniform(1, nq)])
      check(stmt:execute())
   else
      local i = sysbench.rand.uniform(1, nq)
      local e = shard_stmt(ps_shards[i])
      e[2]:set(ps_ids[i])
      check(e[1]:execute())
   end
end

function thread_done()
   -- One write per thread: print() writes the text and the newline separately,
   -- and lines of concurrent threads then interleave.
   io.stdout:write(string.format("bench-errors: %d bench-prepared: %d\n", bad, nprepared))
   io.stdout:flush()
   if stmt ~= nil then
      stmt:close()
   end
   for _, e in pairs(shard_stmts) do
      e[1]:close()
   end
   con:disconnect()
end
