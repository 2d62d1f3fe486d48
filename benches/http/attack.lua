-- wrk script of benches/http/attack.sh: GET /whoami with the bearer tokens
-- of $TOKENS (one per line) in turn, each from a client address in
-- X-Forwarded-For: $CLIENT if set (one attacker), else one of $CLIENTS
-- addresses 198.18.x.y chosen by the token's line (line i from client
-- i mod $CLIENTS; default 251, a prime, so a token file's forged lines
-- spread evenly over the clients). A 200 must carry a valid token's
-- claims ("sub":"t..."; a forged token's sub starts with f), a 401 is a
-- refusal, anything else is other. done() prints one "check:" line and the
-- latency's p50 and p99 (µs).

local requests = {}
local next_index = 0
ok, unauthorized, other, wrong = 0, 0, 0, 0
local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  local client = os.getenv("CLIENT")
  local clients = tonumber(os.getenv("CLIENTS") or "251")
  local i = 0
  for line in io.lines(os.getenv("TOKENS")) do
    local from = client
    if from == nil or from == "" then
      local c = i % clients
      from = string.format("198.18.%d.%d", math.floor(c / 256), c % 256)
    end
    table.insert(requests, wrk.format("GET", "/whoami", {
      ["Authorization"] = "Bearer " .. line,
      ["X-Forwarded-For"] = from,
    }))
    i = i + 1
  end
end

function request()
  next_index = next_index % #requests + 1
  return requests[next_index]
end

function response(status, headers, body)
  if status == 200 then
    if string.find(body, '"sub":"t', 1, true) then
      ok = ok + 1
    else
      wrong = wrong + 1
    end
  elseif status == 401 then
    unauthorized = unauthorized + 1
  else
    other = other + 1
  end
end

function done(summary, latency, reqs)
  local t = { ok = 0, unauthorized = 0, other = 0, wrong = 0 }
  for _, thread in ipairs(threads) do
    for name, _ in pairs(t) do
      t[name] = t[name] + thread:get(name)
    end
  end
  print(string.format("check: ok=%d unauthorized=%d other=%d wrong=%d",
    t.ok, t.unauthorized, t.other, t.wrong))
  print(string.format("latency_us: p50=%d p99=%d", latency:percentile(50), latency:percentile(99)))
end
