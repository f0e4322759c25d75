#!/usr/bin/env bash
# A real Prometheus against `dualpath serve` (issue 34): Debian's prometheus scrapes /metrics
# once a second while two chat sessions run (their later turns hit the KV of the earlier ones),
# then every PromQL expression of deploy/grafana-dashboard.json is asked of Prometheus's HTTP API
# and must return data. Skips (exit 77) without the prometheus binary (scripts/install-deps.sh
# installs it).
#   prometheus_test.sh PATH/TO/dualpath PATH/TO/deploy/grafana-dashboard.json
set -uo pipefail
bin="$1"
dashboard="$2"
command -v prometheus >/dev/null || { echo "SKIP: no prometheus (scripts/install-deps.sh)"; exit 77; }
tmp=$(mktemp -d)
serve_pid="" prom_pid=""
cleanup() {
  [ -n "$prom_pid" ] && kill "$prom_pid" 2>/dev/null
  [ -n "$serve_pid" ] && kill -INT "$serve_pid" 2>/dev/null
  wait 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
fail=0
check() {  # check "what" condition...
  if "${@:2}" >/dev/null; then echo "ok: $1"; else echo "FAIL: $1"; fail=1; fi
}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

port=$(free_port)
"$bin" serve --port "$port" --scheduler-port 0 >"$tmp/out" 2>"$tmp/err" &
serve_pid=$!
for _ in $(seq 1 360); do grep -q ready "$tmp/out" 2>/dev/null && break; sleep 0.5; done
grep -q ready "$tmp/out" || { echo "FAIL: serve did not start"; cat "$tmp/out" "$tmp/err"; exit 1; }
base="http://127.0.0.1:$port"

pport=$(free_port)
cat >"$tmp/prometheus.yml" <<YML
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: dualpath
    metrics_path: /metrics
    static_configs:
      - targets: ["127.0.0.1:$port"]
YML
prometheus --config.file="$tmp/prometheus.yml" --storage.tsdb.path="$tmp/tsdb" \
  --web.listen-address="127.0.0.1:$pport" >"$tmp/prom.log" 2>&1 &
prom_pid=$!
pbase="http://127.0.0.1:$pport"
for _ in $(seq 1 60); do curl -sf "$pbase/-/ready" >/dev/null && break; sleep 0.5; done
check "prometheus is ready" curl -sf "$pbase/-/ready"

# Two sessions of three turns: a long first message, then short appends that hit its KV.
question=$(printf 'Summarise the previous tool output and list the files it touched. %.0s' $(seq 1 40))
for s in 1 2; do
  messages=$(jq -n --arg q "session $s: $question" '[{role: "user", content: $q}]')
  for t in 1 2 3; do
    body=$(jq -n --argjson m "$messages" '{model: "tiny", messages: $m, max_tokens: 16}')
    r=$(curl -s -H 'Content-Type: application/json' "$base/v1/chat/completions" -d "$body")
    reply=$(echo "$r" | jq -r '.choices[0].message.content // empty')
    messages=$(jq -n --argjson m "$messages" --arg a "$reply" --arg u "and then turn $t?" \
      '$m + [{role: "assistant", content: $a}, {role: "user", content: $u}]')
    sleep 1  # spread over scrapes: rate() needs the counters to move between two of them
  done
done
check "the chats hit their KV (cached tokens counted)" \
  sh -c "curl -s '$base/metrics' | grep -E '^dualpath:prompt_tokens_cached_total [1-9]'"

# Let Prometheus take a few scrapes after the load, then ask it.
sleep 6
check "prometheus scraped serve (up == 1)" \
  sh -c "curl -s '$pbase/api/v1/query' --data-urlencode 'query=up{job=\"dualpath\"}' | jq -e '.data.result[0].value[1] == \"1\"'"
n=0
while IFS= read -r expr; do
  n=$((n + 1))
  curl -s "$pbase/api/v1/query" --data-urlencode "query=$expr" >"$tmp/q.json"
  if jq -e '.status == "success" and (.data.result | length) > 0 and
            all(.data.result[]; (.value[1] | tonumber? // "NaN") as $v | $v == $v)' \
       "$tmp/q.json" >/dev/null; then
    echo "ok: dashboard query returns data: $expr"
  else
    echo "FAIL: dashboard query returns no data: $expr"
    head -c 400 "$tmp/q.json"; echo
    fail=1
  fi
done < <(jq -r '.panels[].targets[].expr' "$dashboard")
check "the dashboard has queries" [ "$n" -ge 8 ]
# The two paths' bytes, by name (the dashboard's per-path panel).
check "kv_read_bytes_total carries a path label" \
  sh -c "curl -s '$pbase/api/v1/query' --data-urlencode 'query=dualpath:kv_read_bytes_total' | jq -e '[.data.result[].metric.path] | length > 0'"
[ "$fail" = 0 ] && echo "prometheus test: all passed"
exit "$fail"
