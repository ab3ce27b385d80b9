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
-- is counted and reported as "bench-errors: N" per thread at the end.

sysbench.cmdline.options = {
   mode = {"proxy (SELECT ... WHERE id = global) or direct (dbNNNNN.pins WHERE local_id)", "proxy"},
   ids = {"ID file: one 'global_id shard local_id' line per row", ""},
   db_format = {"shard database name format (direct mode)", "db%05d"},
}

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

function thread_init()
   queries, nq = load_queries()
   con = sysbench.sql.driver():connect()
end

function event()
   local rs = con:query(queries[sysbench.rand.uniform(1, nq)])
   if rs == nil or rs.nrows ~= 1 then
      bad = bad + 1
   end
   if rs ~= nil then
      rs:free()
   end
end

function thread_done()
   print(string.format("bench-errors: %d", bad))
   con:disconnect()
end
