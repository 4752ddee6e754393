-- The benchmark's script for wrk (scripts/bench/wrk.ts runs it): when each
-- connection may send, and what came back in which slice of time.
--
-- Arguments (after the URL), as name=value:
--   start=<ms>  CLOCK_MONOTONIC milliseconds at which slice 0 starts
--   slice=<ms>  length of every slice
--   own=<i,..>  the slices of this target: its connections send only then
--               (and wait, open, in between)
--   warm=<ms>   optional: send from this time on, untimed, until the first
--               own slice (a warm-up on the same connections)
--   rate=<n>    optional: at most n requests per second in all (paced
--               evenly over the connections), instead of a closed loop
--
-- wrk asks delay() before every request it sends; every call but a
-- connection's first comes when that connection's previous answer has been
-- read, so the calls count the answers: each is put in the latest own slice
-- that has started (a request is only sent within one), and the slice lasts
-- until its last answer is in. done() prints one line, WRK-RESULT {json}:
-- those counts, wrk's own totals, its latency percentiles (µs) and the CPU
-- it spent from its first answer in an own slice on.
local ffi = require("ffi")
ffi.cdef [[
typedef struct { long tv_sec; long tv_nsec; } bench_timespec;
int clock_gettime(int clock, bench_timespec *now);
typedef struct { long tv_sec; long tv_usec; } bench_timeval;
typedef struct { bench_timeval user; bench_timeval system; long rest[14]; } bench_rusage;
int getrusage(int who, bench_rusage *usage);
]]

local CLOCK_MONOTONIC = 1
local IDLE_MS = 3600000
local timespec = ffi.new("bench_timespec")

local function now()
  ffi.C.clock_gettime(CLOCK_MONOTONIC, timespec)
  return tonumber(timespec.tv_sec) * 1000 + tonumber(timespec.tv_nsec) / 1000000
end

local start, slice, warm, interval
local own = {}
local nextSlot = nil
-- done() runs in the main state, where init never ran, and reads each thread's globals through
-- thread:get, which copies numbers and strings faithfully (not nested tables): the schedule as
-- plan_start, plan_slice and plan_own ("0,3,4"), and per own slice i the answers (answers<i>) and
-- the time of the last one (last<i>).
local answersKey, lastKey = {}, {}
-- The process's CPU at its first answer in an own slice (cpu_from), so that the CPU reported is that of
-- the timed part: not wrk's start, nor the connections' handshakes.
cpu_from = -1

function init(args)
  local settings = {}
  for i = 1, #args do
    local name, value = string.match(args[i], "^([a-z]+)=(.*)$")
    if name then settings[name] = value end
  end
  start = tonumber(settings.start)
  slice = tonumber(settings.slice)
  for index in string.gmatch(settings.own, "[0-9]+") do own[#own + 1] = tonumber(index) end
  warm = tonumber(settings.warm)
  if settings.rate then interval = 1000 / tonumber(settings.rate) end
  for _, index in ipairs(own) do
    answersKey[index] = "answers" .. index
    lastKey[index] = "last" .. index
    _G[answersKey[index]] = 0
    _G[lastKey[index]] = 0
  end
  plan_start, plan_slice, plan_own = start, slice, settings.own
end

local function cpuMicros()
  local usage = ffi.new("bench_rusage")
  ffi.C.getrusage(0, usage)
  local seconds = tonumber(usage.user.tv_sec) + tonumber(usage.system.tv_sec)
  return seconds * 1000000 + tonumber(usage.user.tv_usec) + tonumber(usage.system.tv_usec)
end

-- The latest own slice started by `at`, and the next one after it (either may be nil).
local function slices(at)
  local current, following
  for _, index in ipairs(own) do
    if start + index * slice <= at then current = index
    elseif following == nil then following = index end
  end
  return current, following
end

-- Milliseconds until the next request may leave: paced when there is a rate, else at once.
local function paced(at)
  if interval == nil then return 0 end
  -- A target that fell behind gets no burst to catch up: the schedule restarts from now.
  if nextSlot == nil or nextSlot < at - interval then nextSlot = at end
  local slot = nextSlot
  nextSlot = nextSlot + interval
  return math.ceil(slot - at)
end

function delay()
  local at = now()
  local current, following = slices(at)
  if current ~= nil then
    if cpu_from < 0 then cpu_from = cpuMicros() end
    local key = answersKey[current]
    _G[key] = _G[key] + 1
    _G[lastKey[current]] = at
    local ends = start + (current + 1) * slice
    if at < ends then
      -- No request leaves after its slice, paced or not: it would be answered in another target's time.
      local wait = paced(at)
      if at + wait < ends then return wait end
    end
  elseif warm ~= nil and at >= warm then
    -- The warm-up, before the first own slice: sent, not counted.
    return paced(at)
  end
  if following == nil then return IDLE_MS end
  local from = start + following * slice
  if current == nil and warm ~= nil then from = math.min(from, warm) end
  return math.ceil(from - at)
end

local threads = {}

function setup(thread)
  threads[#threads + 1] = thread
end

function done(summary, latency, requests)
  local first = threads[1]
  local planStart, planSlice = first:get("plan_start"), first:get("plan_slice")
  local parts = {}
  for index in string.gmatch(first:get("plan_own"), "[0-9]+") do
    local count, last = 0, 0
    for _, thread in ipairs(threads) do
      count = count + thread:get("answers" .. index)
      last = math.max(last, thread:get("last" .. index))
    end
    local from = planStart + tonumber(index) * planSlice
    parts[#parts + 1] = string.format('{"index":%d,"answers":%d,"ms":%.3f}', index, count, math.max(from + planSlice, last) - from)
  end
  local timedFrom = 0
  for _, thread in ipairs(threads) do
    local from = thread:get("cpu_from")
    if from >= 0 and (timedFrom == 0 or from < timedFrom) then timedFrom = from end
  end
  local errors = summary.errors
  io.write(string.format(
    'WRK-RESULT {"requests":%d,"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},' ..
    '"latencyUs":{"p50":%d,"p99":%d,"p999":%d,"max":%d},"cpuUs":%d,"slices":[%s]}\n',
    summary.requests, errors.connect, errors.read, errors.write, errors.status, errors.timeout,
    latency:percentile(50), latency:percentile(99), latency:percentile(99.9), latency.max,
    cpuMicros() - timedFrom, table.concat(parts, ",")))
  io.flush()
end
