#!/usr/bin/env sysbench
-- Point selects by global 64-bit ID through shardgate with server-side
-- prepared statements (sysbench's con:prepare / stmt:execute, which use
-- COM_STMT_PREPARE / COM_STMT_EXECUTE unless --db-ps-mode=disable).
--
-- Driven by integration/drivers/sysbench/run.sh, which seeds the rows and
-- writes the ID file (one global ID per line). Every event picks a row at
-- random and executes, alternately, the statement with the ID bound as a
-- BIGINT (exact: built as a LuaJIT int64, not a double) and with the ID bound
-- as a VARCHAR (a quoted decimal ID, as Node's mysql2 sends it). A result that
-- is not exactly one row is counted and reported per thread as
-- "driver-errors: N"; run.sh requires zero.

local ffi = require("ffi")

sysbench.cmdline.options = {
   ids = {"ID file: one global 64-bit ID per line", ""},
   sql = {"statement executed with the ID bound to its one placeholder",
          "SELECT id, data FROM pins WHERE id = ?"},
}

local ids_int, ids_str, nids
local con, stmt_int, stmt_str, p_int, p_str
local bad, events = 0, 0

-- A decimal string as an exact int64 (LuaJIT numbers are doubles: 53 bits).
local function int64(s)
   local v = ffi.new("int64_t", 0)
   for d in s:gmatch("%d") do
      v = v * 10 + tonumber(d)
   end
   return v
end

local function load_ids()
   local path = sysbench.opt.ids
   local f = assert(io.open(path, "r"), "cannot open ID file '" .. path .. "'")
   local ints, strs = {}, {}
   for line in f:lines() do
      local id = line:match("^(%d+)")
      if id then
         strs[#strs + 1] = id
         ints[#ints + 1] = int64(id)
         assert(tostring(ints[#ints]):gsub("LL$", "") == id, "int64 conversion of " .. id)
      end
   end
   f:close()
   assert(#ints > 0, "no IDs in '" .. path .. "'")
   return ints, strs, #ints
end

function thread_init()
   ids_int, ids_str, nids = load_ids()
   con = sysbench.sql.driver():connect()
   stmt_int = con:prepare(sysbench.opt.sql)
   p_int = stmt_int:bind_create(sysbench.sql.type.BIGINT)
   stmt_int:bind_param(p_int)
   stmt_str = con:prepare(sysbench.opt.sql)
   p_str = stmt_str:bind_create(sysbench.sql.type.VARCHAR, 24)
   stmt_str:bind_param(p_str)
end

local function check(rs)
   if rs == nil or rs.nrows ~= 1 then
      bad = bad + 1
   end
   if rs ~= nil then
      rs:free()
   end
end

function event()
   local i = sysbench.rand.uniform(1, nids)
   events = events + 1
   if events % 2 == 0 then
      p_int:set(ids_int[i])
      check(stmt_int:execute())
   else
      -- Zero the buffer first: set() copies the new ID over the old one
      -- without a terminator, and sysbench's emulated prepares
      -- (--db-ps-mode=disable) read it as a C string.
      ffi.fill(p_str.buffer, p_str.max_len)
      p_str:set(ids_str[i])
      check(stmt_str:execute())
   end
end

function thread_done()
   -- One write per thread: print() writes the text and the newline
   -- separately, and lines of threads finishing together then interleave.
   io.stdout:write(string.format("driver-errors: %d of %d\n", bad, events))
   io.stdout:flush()
   stmt_int:close()
   stmt_str:close()
   con:disconnect()
end
