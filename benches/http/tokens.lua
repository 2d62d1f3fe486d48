-- wrk script of benches/http/tokens.sh: GET $TARGET (default /whoami)
-- with the bearer tokens
-- of $TOKENS (one per line) in turn, and a check of every answer against
-- $KINDS ("f" forged / "t" valid, line by line): a 200 must carry a valid
-- token's claims ("sub":"t..."), a 401 counts as a refusal; anything else
-- is a wrong answer. done() prints one "check:" line summed over threads,
-- and the latency's p50 and p99 in µs ("latency_us:").
-- With $CLIENT or $CLIENTS (benches/http/attack.sh), each request also
-- names its client in X-Forwarded-For: $CLIENT (one client), or one of
-- $CLIENTS addresses 198.18.x.y chosen by the token's line (line i from
-- client i mod $CLIENTS; a prime spreads a file's forged lines evenly).

local requests, kinds = {}, {}
local next_index = 0
sent_forged, ok, unauthorized, other, wrong = 0, 0, 0, 0, 0
local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  local target = os.getenv("TARGET") or "/whoami"
  local client = os.getenv("CLIENT")
  local clients = tonumber(os.getenv("CLIENTS") or "")
  local i = 0
  for line in io.lines(os.getenv("TOKENS")) do
    local headers = { ["Authorization"] = "Bearer " .. line }
    if client ~= nil and client ~= "" then
      headers["X-Forwarded-For"] = client
    elseif clients ~= nil then
      local c = i % clients
      headers["X-Forwarded-For"] = string.format("198.18.%d.%d", math.floor(c / 256), c % 256)
    end
    table.insert(requests, wrk.format("GET", target, headers))
    i = i + 1
  end
  for line in io.lines(os.getenv("KINDS")) do
    table.insert(kinds, line)
  end
end

function request()
  next_index = next_index % #requests + 1
  if kinds[next_index] == "f" then
    sent_forged = sent_forged + 1
  end
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
  local t = { sent_forged = 0, ok = 0, unauthorized = 0, other = 0, wrong = 0 }
  for _, thread in ipairs(threads) do
    for name, _ in pairs(t) do
      t[name] = t[name] + thread:get(name)
    end
  end
  print(string.format("check: sent_forged=%d ok=%d unauthorized=%d other=%d wrong=%d",
    t.sent_forged, t.ok, t.unauthorized, t.other, t.wrong))
  print(string.format("latency_us: p50=%d p99=%d", latency:percentile(50), latency:percentile(99)))
end
