# Sourced by benches/http/tokens.sh and benches/http/issuer.sh: the
# servers they start (`pids`, killed when the script exits) and the
# address each logs once serving.
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
# The address a server logged (it logs "... on http://ADDR" once serving);
# the log is printed and the script exits if none comes within 30 s.
address() {
  local log=$1
  for _ in $(seq 1 300); do
    # Whole lines only: the gateway's ends with its signing key, a peer's
    # with "(ready)".
    if grep -qE "(public face on http://.* signing key|listening on http://.* \(ready\))" "$log"; then
      grep -m1 -oE "(public face on|listening on) http://[0-9.:]+" "$log" | sed -E 's/.*http:\/\///'
      return
    fi
    sleep 0.1
  done
  cat "$log" >&2; exit 1
}
