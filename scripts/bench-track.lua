-- wrk script of `npm run bench:analytics`: single browser-like events to POST /v1/track from 20,000
-- visitors (X-Forwarded-For, trusted for the run), 300 pages, 4 pageviews to 1 engagement ping.
-- Environment: TRACK_KEY (the site's collect key), TRACK_HOST (the page host), TRACK_NET (first octet of
-- the visitors' addresses, default 10), TRACK_RATE (optional:
-- requests per second per wrk thread, sent on a fixed schedule whatever the answers' latency, as
-- browsers do; without it every connection sends its next request as soon as it has the answer). Prints
-- `WRKRESULT <202s> <503s> <429s> <other>` per thread and `WRKLAT <p50 ms> <p99 ms> <duration s>`.
local key = os.getenv("TRACK_KEY")
local host = os.getenv("TRACK_HOST") or "site0.bench.test"
local uas = {
  "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
  "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Safari/605.1.15",
  "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0",
  "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1",
  "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Mobile Safari/537.36",
  "Mozilla/5.0 (iPad; CPU OS 17_6 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.6 Mobile/15E148 Safari/604.1",
}
local referrers = { "", "", "", "https://www.google.com/", "https://news.ycombinator.com/", "https://duckduckgo.com/", "https://t.co/abc" }
local rate = tonumber(os.getenv("TRACK_RATE") or "")
local net = tonumber(os.getenv("TRACK_NET") or "") or 10
local threads = {}
local n = 0
ok, refused, limited, other = 0, 0, 0, 0

function setup(thread)
  table.insert(threads, thread)
end

request = function()
  n = n + 1
  local v = (n * 7919) % 20000
  local url = string.format("https://%s/docs/page-%d%s", host, (n * 31) % 300, (n % 11 == 0) and "?utm_source=newsletter&utm_campaign=launch" or "")
  local body
  if n % 5 ~= 4 then
    body = string.format('{"key":"%s","type":"pageview","url":"%s","referrer":"%s"}', key, url, referrers[(n % #referrers) + 1])
  else
    body = string.format('{"key":"%s","type":"engagement","url":"%s","engaged_ms":%d}', key, url, 1000 + (n % 50) * 700)
  end
  return wrk.format("POST", "/v1/track", {
    ["Content-Type"] = "text/plain;charset=UTF-8",
    ["User-Agent"] = uas[(v % #uas) + 1],
    ["X-Forwarded-For"] = string.format("%d.%d.%d.%d", net, math.floor(v / 65536) % 256, math.floor(v / 256) % 256, v % 256),
    ["Origin"] = "https://" .. host,
  }, body)
end

-- The fixed schedule: request k of this thread is due at start + k / rate (clock_gettime via LuaJIT's
-- FFI; wrk has no wall clock of its own). A late request is sent at once, so the offered rate holds.
if rate then
  local ffi = require("ffi")
  ffi.cdef[[ typedef struct { long tv_sec; long tv_nsec; } wrk_timespec; int clock_gettime(int clk_id, wrk_timespec *tp); ]]
  local ts = ffi.new("wrk_timespec")
  local function now_ms()
    ffi.C.clock_gettime(1, ts) -- CLOCK_MONOTONIC
    return tonumber(ts.tv_sec) * 1000 + tonumber(ts.tv_nsec) / 1e6
  end
  local start, k = nil, 0
  delay = function()
    local t = now_ms()
    start = start or t
    k = k + 1
    local due = start + k * 1000 / rate
    return due > t and math.floor(due - t) or 0
  end
end

response = function(status)
  if status == 202 then ok = ok + 1 elseif status == 503 then refused = refused + 1 elseif status == 429 then limited = limited + 1 else other = other + 1 end
end

done = function(summary, latency)
  for _, t in ipairs(threads) do
    io.write(string.format("WRKRESULT %d %d %d %d\n", t:get("ok"), t:get("refused"), t:get("limited"), t:get("other")))
  end
  io.write(string.format("WRKLAT %f %f %f\n", latency:percentile(50) / 1000, latency:percentile(99) / 1000, summary.duration / 1e6))
end
