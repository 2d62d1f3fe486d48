# Shared by benches/http/cpu.sh and benches/http/attack.sh (sourced): waits
# for a server they started to say it listens, then reads its addresses.
#
# await_server NAME PID LOG: waits up to 30 s for LOG (the server's
# stderr) to say `gateway serve`'s "public face on http://… signing key" or
# token_bench's "listening on http://… (ready)"; exits 1 with the log if
# it does not. Then sets $public (HOST:PORT), and for a gateway $admin
# (its admin face) and $secret_file (the admin secret it generated);
# both empty for a peer.
await_server() {
  local name=$1 pid=$2 log=$3
  local ready="public face on http://.* signing key|listening on http://.* \(ready\)"
  for _ in $(seq 1 300); do
    grep -qE "$ready" "$log" && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  grep -qE "$ready" "$log" || { echo "$name did not start:" >&2; cat "$log" >&2; exit 1; }
  public=$(grep -m1 -oE "(public face on|listening on) http://[0-9.:]+" "$log" | sed -E 's/.*http:\/\///')
  admin=$(grep -m1 -oE "admin face on http://[0-9.:]+" "$log" | sed -E 's/.*http:\/\///' || true)
  secret_file=$(sed -n 's/^gateway serve: admin secret in //p' "$log")
}
