#!/usr/bin/env bash
# The live cluster on separate "hosts" with real network faults (issue 31, and docs/deploy.md §6
# as written, issue 37): the scheduler and each node in its own network namespace with its own
# address on a bridge, UCX over TCP between them, the store on a shared directory (as a 3FS or
# NFS mount would be), the control plane authenticated with `dualpath keygen`'s credential.
# Chats go through the HTTP API from the scheduler's host while:
#   1. decode node 1 is partitioned (its link detached from the switch: packets dropped, no
#      kill) for 6 s, then reconnected;
#   2. prefill node 1 the same;
#   3. every link delays 20 ms and drops 1 % of frames (impair.py: this kernel has no netem);
#      the replies must be those of a clean run;
#   4. the scheduler is killed (SIGKILL) under load and restarted on its port: the nodes
#      re-register, the next turns succeed on their first attempt and hit the stored blocks;
#   5. a node without the credential, one with another, junk bytes and 300 idle connections on
#      the scheduler's port: refused, and the service goes on (RSS growth < 50 MiB).
# Prints each phase's timings and a JSON summary (netns_summary.json in the work directory);
# exits 1 on any failed check. Needs root (network namespaces, veth, a bridge) and ethtool;
# skips (exit 77) elsewhere.
#
#   netns_cluster_test.sh BUILD/dualpath [WORKDIR]
set -uo pipefail
dualpath=$(readlink -f "${1:?usage: netns_cluster_test.sh DUALPATH [WORKDIR]}")
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
skip() { echo "netns_cluster_test: SKIPPED: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root (network namespaces)"
command -v ip >/dev/null && command -v ethtool >/dev/null || skip "needs iproute2 and ethtool (scripts/install-deps.sh)"
pfx="dpn$$"
ip netns add "${pfx}probe" 2>/dev/null || skip "cannot create a network namespace here"
ip netns del "${pfx}probe"

keep=0
[ -n "${2:-}" ] && keep=1
work=${2:-$(mktemp -d /tmp/dp_netns.XXXXXX)}
mkdir -p "$work/store"
failures=0
fail() { echo "netns_cluster_test: FAIL: $*"; failures=$((failures + 1)); }
note() { printf '%s netns_cluster_test: %s\n' "$(date +%T)" "$*"; }
now() { date +%s.%N; }

sw="${pfx}sw"
hosts=(s p0 p1 d0 d1)
declare -A addr=([s]=10.77.0.1 [p0]=10.77.0.11 [p1]=10.77.0.12 [d0]=10.77.0.21 [d1]=10.77.0.22)
pids=()
cleanup() {
  disown -a 2>/dev/null
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  pkill -9 -f "$work/" 2>/dev/null
  for h in "${hosts[@]}"; do ip netns del "$pfx$h" 2>/dev/null; done
  ip netns del "$sw" 2>/dev/null
  [ "$keep" = 0 ] && rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# --- the network: a switch namespace with a bridge; each host's eth0 reaches it through
# h_a (on the bridge), or, while impaired, through impair.py between h_a and h_b (h_c on the
# bridge).
ip netns add "$sw"
ip -n "$sw" link add br0 type bridge
ip -n "$sw" link set br0 up
ip -n "$sw" link set lo up
for h in "${hosts[@]}"; do
  ns="$pfx$h"
  ip netns add "$ns"
  ip -n "$ns" link set lo up
  ip link add eth0 netns "$ns" type veth peer name "${h}_a" netns "$sw"
  ip -n "$sw" link add "${h}_b" type veth peer name "${h}_c"
  ip -n "$ns" addr add "${addr[$h]}/24" dev eth0
  ip -n "$ns" link set eth0 up
  for i in "${h}_a" "${h}_b" "${h}_c"; do ip -n "$sw" link set "$i" up; done
  ip -n "$sw" link set "${h}_a" master br0
  ip -n "$sw" link set "${h}_c" master br0
  # A frame relayed by a packet socket keeps what offloads left undone (checksums, segments).
  ip netns exec "$ns" ethtool -K eth0 tx off tso off gso off gro off >/dev/null 2>&1
  for i in "${h}_a" "${h}_b" "${h}_c"; do
    ip netns exec "$sw" ethtool -K "$i" tx off tso off gso off gro off >/dev/null 2>&1
  done
done
inns() { local h=$1; shift; ip netns exec "$pfx$h" "$@"; }

# --- the cluster, as docs/deploy.md §6 writes it.
cfg="$work/cluster.toml"
sed "s|/mnt/dualpath-kv|$work/store|" "$root/configs/cluster.toml" > "$cfg"
"$dualpath" keygen --out "$work/cluster.key" >/dev/null || fail "keygen"
stamp() { python3 -u -c 'import sys, time
for line in sys.stdin: print(f"{time.time():.3f} {line}", end="", flush=True)'; }
start_serve() {
  inns s env DUALPATH_LOG=info "$dualpath" serve --config "$cfg" --external-nodes --scheduler-host "${addr[s]}" \
    --cluster-key "$work/cluster.key" --port 8000 2>&1 | stamp >> "$work/serve.log" &
  pids+=($!)
}
start_node() {  # ROLE INDEX HOST
  inns "$3" "$dualpath" node --scheduler "${addr[s]}:8100" --role "$1" --index "$2" \
    --cluster-key "$work/cluster.key" --listen eth0 --connect-timeout 60 2>&1 | stamp >> "$work/node_$3.log" &
  pids+=($!)
}
wait_log() {  # FILE PATTERN TIMEOUT_S -> prints the line's timestamp
  local end=$(( $(date +%s) + $3 ))
  while [ "$(date +%s)" -lt "$end" ]; do
    local line; line=$(grep -m1 -- "$2" "$1" 2>/dev/null) && { echo "${line%% *}"; return 0; }
    sleep 0.05
  done
  return 1
}
wait_since() {  # FILE T PATTERN TIMEOUT_S -> the first matching line's timestamp after T
  local end=$(( $(date +%s) + $4 )) t
  while [ "$(date +%s)" -lt "$end" ]; do
    t=$(awk -v t="$2" -v p="$3" '$1 >= t && index($0, p) { print $1; exit }' "$1")
    [ -n "$t" ] && { echo "$t"; return 0; }
    sleep 0.05
  done
  return 1
}
count_since() { awk -v t="$2" -v p="$3" '$1 >= t && index($0, p) { n++ } END { print n + 0 }' "$1"; }
api() { inns s curl -s --max-time 60 "$@"; }

start_serve
start_node prefill 0 p0; start_node prefill 1 p1; start_node decode 0 d0; start_node decode 1 d1
wait_log "$work/serve.log" "ready" 120 >/dev/null || { tail -20 "$work"/*.log; fail "the cluster did not become ready"; exit 1; }
note "cluster ready: scheduler ${addr[s]}:8100 (mutual TLS), nodes on 4 other hosts, UCX over TCP"
serve_pid() { pgrep -f "dualpath serve --config $cfg" | head -1; }
rss_kib() { awk '/VmRSS/ { print $2 }' "/proc/$(serve_pid)/status"; }
rss0=$(rss_kib)
# Debugging: DP_NETNS_PAUSE=S keeps the ready cluster S seconds before the phases.
[ -n "${DP_NETNS_PAUSE:-}" ] && sleep "$DP_NETNS_PAUSE"

load() {  # OUT [SESSIONS TURNS [DURATION_S]]
  inns s python3 "$here/chat_load.py" --url http://127.0.0.1:8000 --sessions "${2:-6}" \
    --turns "${3:-6}" --duration "${4:-0}" --max-tokens 24 --timeout 120 --out "$1"
}
summarize() {  # FILE -> "n failed maxlat retried migrated"
  python3 - "$1" <<'PY'
import json, sys
rs = [json.loads(l) for l in open(sys.argv[1])]
bad = [r for r in rs if r.get("status") != 200]
print(len(rs), len(bad), round(max((r["latency_s"] for r in rs), default=0), 2),
      sum(1 for r in rs if (r.get("attempts") or 1) > 1), sum(1 for r in rs if r.get("migrated")))
PY
}
declare -A result

# --- 0. a clean run: the reference replies.
load "$work/clean.jsonl"
read -r n bad lat retried migrated < <(summarize "$work/clean.jsonl")
note "clean: $n requests, $bad failed, max latency $lat s"
[ "$bad" = 0 ] || fail "clean run: $bad of $n requests failed"
result[clean]="{\"requests\": $n, \"failed\": $bad, \"max_latency_s\": $lat}"

# --- 1, 2. partitions (the host's link detached from the switch: packets dropped).
partition() {  # HOST NAME ROLE_INDEX_TEXT
  local h=$1 name=$2 who=$3
  load "$work/$name.jsonl" 6 0 14 &
  local loader=$!
  sleep 3
  local t0; t0=$(now)
  ip -n "$sw" link set "${h}_a" nomaster
  local dead; dead=$(wait_since "$work/serve.log" "$t0" "$who is dead" 10)
  sleep 6
  local t1; t1=$(now)
  ip -n "$sw" link set "${h}_a" master br0
  local back; back=$(wait_since "$work/serve.log" "$t1" "$who registered" 30)
  wait "$loader"
  read -r n bad lat retried migrated < <(summarize "$work/$name.jsonl")
  local detect="null" rereg="null"
  [ -n "$dead" ] && detect=$(python3 -c "print(round($dead - $t0, 2))")
  [ -n "$back" ] && rereg=$(python3 -c "print(round($back - $t1, 2))")
  local turns_retried; turns_retried=$(count_since "$work/serve.log" "$t0" "retrying on live nodes")
  local turns_migrated; turns_migrated=$(count_since "$work/serve.log" "$t0" "migrating its decode")
  note "$name: $who detected dead ${detect} s after the partition, re-registered ${rereg} s after the link returned; $n requests, $bad failed, max latency $lat s, $turns_retried attempts retried, $turns_migrated migrated"
  [ "$detect" != null ] || fail "$name: $who was not declared dead"
  [ "$rereg" != null ] || fail "$name: $who did not re-register"
  [ "$bad" = 0 ] || fail "$name: $bad of $n requests failed"
  result[$name]="{\"detect_s\": $detect, \"reregister_s\": $rereg, \"requests\": $n, \"failed\": $bad, \"max_latency_s\": $lat, \"attempts_retried\": $turns_retried, \"migrations\": $turns_migrated}"
}
partition d1 partition_decode "decode node 1"
partition p1 partition_prefill "prefill node 1"

# --- 3. 20 ms delay and 1 % loss on every link.
for h in "${hosts[@]}"; do
  echo "20 0.01" > "$work/impair_$h"
  ip -n "$sw" link set "${h}_a" nomaster
  ip netns exec "$sw" python3 "$here/impair.py" "${h}_a" "${h}_b" "$work/impair_$h" &
  pids+=($!)
done
sleep 1
t0=$(now)
load "$work/impaired.jsonl"
read -r n bad lat retried migrated < <(summarize "$work/impaired.jsonl")
same=$(python3 - "$work/clean.jsonl" "$work/impaired.jsonl" <<'PY'
import json, sys
a = {(r["session"], r["turn"]): r.get("text") for r in map(json.loads, open(sys.argv[1]))}
b = {(r["session"], r["turn"]): r.get("text") for r in map(json.loads, open(sys.argv[2]))}
print(sum(1 for k in a if b.get(k) == a[k] and a[k] is not None), len(a))
PY
)
note "impaired (20 ms, 1 % loss on every link): $n requests, $bad failed, max latency $lat s; replies identical to the clean run: $same"
[ "$bad" = 0 ] || fail "impaired: $bad of $n requests failed"
[ "${same% *}" = "${same#* }" ] || fail "impaired: replies differ from the clean run ($same identical)"
result[impaired]="{\"requests\": $n, \"failed\": $bad, \"max_latency_s\": $lat, \"identical_replies\": ${same% *}, \"of\": ${same#* }}"
for h in "${hosts[@]}"; do echo "0 0" > "$work/impair_$h"; done
pkill -f "$here/impair.py" ; sleep 0.2
for h in "${hosts[@]}"; do ip -n "$sw" link set "${h}_a" master br0; done

# --- 4. the scheduler killed under load and restarted on its port.
load "$work/restart_before.jsonl" 12 0 8 &
loader=$!
sleep 3
kill -9 "$(serve_pid)"
t0=$(now)
sleep 0.3
start_serve
ready=$(wait_since "$work/serve.log" "$t0" "ready" 60)
wait "$loader"
regs=$(awk -v t="$t0" '$1 >= t && / registered \(control service/ { print $1 }' "$work/serve.log" | tail -1)
rereg=$( [ -n "$regs" ] && python3 -c "print(round($regs - $t0, 2))" || echo null)
# The conversations of the clean run again: their second turns' prompts were stored before.
load "$work/restart_after.jsonl" 6 2
after=$(python3 - "$work/restart_after.jsonl" <<'PY'
import json, sys
rs = [json.loads(l) for l in open(sys.argv[1])]
second = [r for r in rs if r["turn"] >= 1]
print(sum(r.get("status") == 200 for r in rs), sum(r.get("attempts") == 1 for r in rs), len(rs),
      sum((r.get("cached") or 0) > 0 for r in second), len(second))
PY
)
read -r ok first total hit seconds <<<"$after"
note "scheduler restart: every node re-registered ${rereg} s after the kill (lease TTL 1 s); after it $ok of $total turns served, $first on their first attempt; $hit of $seconds second turns hit the blocks stored before the restart"
[ "$rereg" != null ] || fail "restart: the nodes did not re-register"
python3 -c "import sys; sys.exit(0 if $rereg <= 2.0 + 0.5 else 1)" 2>/dev/null || fail "restart: re-registration took $rereg s (two lease TTLs: 2 s)"
[ "$ok" = "$total" ] && [ "$first" = "$total" ] && [ "$hit" = "$seconds" ] || fail "restart: $ok served, $first first attempt of $total; $hit of $seconds second turns hit"
result[restart]="{\"reregister_s\": $rereg, \"served\": $ok, \"first_attempt\": $first, \"of\": $total, \"second_turn_hits\": $hit, \"second_turns\": $seconds}"

# --- 5. no credential, another credential, junk, 300 idle connections.
code=0; inns d1 timeout 60 "$dualpath" node --scheduler "${addr[s]}:8100" --role decode --listen eth0 \
  --connect-timeout 3 > "$work/nokey.log" 2>&1 || code=$?
grep -q -- "--cluster-key" "$work/nokey.log" && [ "$code" != 0 ] || fail "a node without the credential: exit $code, $(cat "$work/nokey.log")"
"$dualpath" keygen --out "$work/other.key" >/dev/null
code=0; inns d1 timeout 60 "$dualpath" node --scheduler "${addr[s]}:8100" --role decode --listen eth0 \
  --cluster-key "$work/other.key" --connect-timeout 3 > "$work/otherkey.log" 2>&1 || code=$?
[ "$code" != 0 ] || fail "a node with another credential was admitted"
inns p1 python3 - "${addr[s]}" <<'PY'
import os, socket, sys, time
host = sys.argv[1]
for i in range(20):  # junk: random bytes, an HTTP/1 request, a fake TLS hello
    s = socket.create_connection((host, 8100), timeout=5)
    s.sendall([os.urandom(65536), b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", b"\x16\x03\x01\x02\x00" + os.urandom(512)][i % 3])
    s.close()
idle = [socket.create_connection((host, 8100), timeout=5) for _ in range(300)]
time.sleep(3)
for s in idle: s.close()
PY
served=$(api -o /dev/null -w '%{http_code}' http://127.0.0.1:8000/v1/chat/completions -H 'Content-Type: application/json' \
  -d '{"model": "tiny", "messages": [{"role": "user", "content": "still there?"}], "max_tokens": 8}')
rss1=$(rss_kib)
note "unauthenticated: no credential refused (exit $code, '$(grep -o 'the control plane crosses hosts only with the cluster credential' "$work/nokey.log" | head -1)'), another credential refused; 20 junk connections and 300 idle ones: the API answers $served; scheduler RSS $((rss0 / 1024)) -> $((rss1 / 1024)) MiB"
[ "$served" = 200 ] || fail "the API did not answer after the junk ($served)"
[ $((rss1 - rss0)) -lt $((50 * 1024)) ] || fail "RSS grew $(((rss1 - rss0) / 1024)) MiB"
result[unauthenticated]="{\"refused_without_key\": true, \"refused_other_key\": true, \"served_after\": $served, \"rss_growth_mib\": $(((rss1 - rss0) / 1024))}"

{
  echo "{"
  first=1
  for k in clean partition_decode partition_prefill impaired restart unauthenticated; do
    [ $first = 1 ] || echo ","
    printf '  "%s": %s' "$k" "${result[$k]:-null}"
    first=0
  done
  echo; echo "}"
} > "$work/netns_summary.json"
cat "$work/netns_summary.json"
if [ "$failures" -gt 0 ]; then
  echo "netns_cluster_test: $failures check(s) failed; logs in $work"
  keep=1
  exit 1
fi
echo "netns_cluster_test: passed"
