#!/usr/bin/env bash
# Bad input gets one clear line and a non-zero exit, never a crash (issue 2 "Bad input").
# Usage: cli_errors_test.sh path/to/dualpath
set -u
bin="$1"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
expect_error() {  # expect_error "what it must mention" args...
  local needle="$1"; shift
  "$bin" "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  if [ "$rc" -eq 0 ] || [ "$rc" -ge 128 ]; then
    echo "FAIL: dualpath $* exited $rc (want a clean non-zero exit)"; fail=1; return
  fi
  if ! grep -q -- "$needle" "$tmp/err"; then
    echo "FAIL: dualpath $*: stderr does not mention '$needle':"; cat "$tmp/err"; fail=1; return
  fi
  if [ "$(wc -l <"$tmp/err")" -gt 3 ]; then
    echo "FAIL: dualpath $*: error is not short:"; cat "$tmp/err"; fail=1; return
  fi
  echo "ok: dualpath $* -> $(head -1 "$tmp/err")"
}
printf '{"id":"t","requests":[{"in":"x"}]}\n' >"$tmp/bad.jsonl"
printf '[hardware]\nsnic_gbps = -1\n' >"$tmp/neg.toml"
printf '[cluster]\nprefil_nodes = 2\n' >"$tmp/typo.toml"
expect_error "ds660b" sim --model ds600b --quiet
expect_error "full" sim --mode ful --quiet
expect_error "agents" sim --agents 0 --quiet
expect_error "2P4D" sim --pd 2P --quiet
expect_error "does not exist" sim --dataset weka:"$tmp/missing.jsonl" --quiet
expect_error "bad.jsonl:1" sim --dataset weka:"$tmp/bad.jsonl" --quiet
expect_error "hardware.snic_gbps" sim --config "$tmp/neg.toml" --quiet
expect_error "did you mean 'cluster.prefill_nodes'" sim --config "$tmp/typo.toml" --quiet
expect_error "config file" sim --config "$tmp/nope.toml" --quiet
# A calibration flag given out of range is an error, not a silent "unset" (they were sentinels).
expect_error "efficiency.layer_overhead_ms = -2" sim --layer-overhead-ms -2 --agents 4 --quiet
# Issue 35's knobs: each bad value names the flag and the fix.
expect_error "--dram-tier 'lots'" sim --dram-tier lots --agents 4 --quiet
expect_error "use never, always or predict" sim --dram-tier 400G --prefetch sometimes --agents 4 --quiet
expect_error "give it one with cache.de_dram_gb" sim --prefetch predict --agents 4 --quiet
expect_error "use lru" sim --store-capacity 1T --evict fifo --agents 4 --quiet
expect_error "use mode full or split" sim --dram-tier 400G --mode basic --agents 4 --quiet
expect_error "--slo-turns 'first'" sim --aps 0.1 --slo-turns first --quiet
expect_error "efficiency.linear_mfu = 0" sim --linear-mfu 0 --agents 4 --quiet
expect_error "cluster.basic_prefill_kv_gb = -3" sim --basic-prefill-kv-gb -3 --agents 4 --quiet
expect_error "--snic-gbps" plan --snic-gbps 0
expect_error "--dram-gbps" plan --dram-gbps -5
expect_error "unknown dataset" sim --dataset 16k --quiet
printf '[live]\ncompute = "modeled"\n[workload]\nthink_time = true\n' >"$tmp/think.toml"
expect_error "config" bench live --mode full
expect_error "basic (PE read path only)" bench live --config "$tmp/typo.toml" --mode fast
expect_error "cluster.prefill_nodes" bench live --config "$tmp/typo.toml" --mode full
expect_error "think_time" bench live --config "$tmp/think.toml" --mode full
expect_error "hit-tokens" bench overlap --hit-tokens 100
expect_error "unknown mode 'busy'" bench transport --modes busy --transports sm
expect_error "median" bench transport --statistic mean --transports sm
expect_error "12X" bench transport --bytes-per-case 12X --transports sm
expect_error "linear_mfu" paper --linear-mfu 2 --figures fig9 --no-plots --out "$tmp/paper"
# Out-of-range values and unwritable outputs are refused before the run, naming the flag or key.
expect_error "agents = -1" sim --agents -1 --quiet
expect_error "workload.append_scale = 0 (--append-scale) must be" sim --append-scale 0 --quiet
expect_error "--json '$tmp' is a directory" sim --json "$tmp" --agents 4 --quiet
expect_error "layer_overhead_ms = inf" sim --layer-overhead-ms inf --quiet
expect_error "--seed -3" sim --seed -3 --quiet
# Command-line slips: one line, with the closest option or subcommand.
expect_error "did you mean '--agents'" sim --agent 3
expect_error "Could not convert: --agents = x" sim --agents x
expect_error "did you mean 'store'" bench stor
expect_error "unknown subcommand 'simm'; did you mean 'sim'" simm
# A partial or overridden paper run never lands in the committed docs/results by default.
expect_error "--out is required with --figures" paper --figures fig9 --no-plots
expect_error "--out '': give a folder" paper --out "" --figures fig9
expect_error "--threads 0" paper --threads 0 --out "$tmp/paper"
expect_error "--model requires --nodes" plan --model ds27b
expect_error "--nodes 0 is too few" plan --nodes 0
expect_error "no split of 3 nodes" plan --nodes 3 --agents 8 --dataset 32k
expect_error "message size 0 B is out of range" bench transport --sizes 0 --transports sm
expect_error "'-1' is not a size" bench transport --sizes -1 --transports sm
printf '[live]\ncomptue = "modeled"\n' >"$tmp/livetypo.toml"
expect_error "did you mean 'live.compute'" bench live --config "$tmp/livetypo.toml" --mode full
expect_error "is a directory" sim --config "$tmp" --quiet
expect_error "--seed -1" workload --seed -1
expect_error "ask for 1 to 100000" workload --trajectories 100000000
expect_error "cluster.decode_nodes = 0" demo --decode-nodes 0
printf '[emulation]\nsnic_gpbs = 8\n' >"$tmp/emutypo.toml"
expect_error "did you mean 'emulation.snic_gbps'" demo --config "$tmp/emutypo.toml"
# Online runs and the capacity search (issue 16): one line naming the key and the fix, exit 2.
expect_exit2() {  # expect_exit2 "what it must mention" args...
  "$bin" "${@:2}" >/dev/null 2>&1
  local rc=$?
  [ "$rc" -eq 2 ] || { echo "FAIL: dualpath ${*:2} exited $rc, want 2"; fail=1; }
  expect_error "$@"
}
expect_exit2 "--aps 0: the arrival rate must be a positive" sim --aps 0 --quiet
expect_exit2 "--aps -0.5: the arrival rate must be a positive" sim --aps -0.5 --quiet
expect_exit2 "online.slo_ttft_s = 0 (--slo-ttft)" sim --aps 0.1 --slo-ttft 0 --quiet
expect_exit2 "online.slo_tpot_ms = -5 (--slo-tpot)" sim --aps 0.1 --slo-tpot -5 --quiet
expect_exit2 "online.slo_statistic = 'p95'" sim --aps 0.1 --slo-statistic p95 --quiet
expect_exit2 "online.duration_s = 0 (--duration)" sim --aps 0.1 --duration 0 --quiet
expect_exit2 "--agents is for offline runs" sim --aps 0.1 --agents 5 --quiet
printf '{"timestamp": 0, "input_length": 600, "output_length": 3, "hash_ids": [0, 1]}\n{"timestamp": 5, "input_length": 600}\n' >"$tmp/moon.jsonl"
expect_exit2 "moon.jsonl:2: 'output_length'" sim --dataset mooncake:"$tmp/moon.jsonl" --quiet
expect_exit2 "trace's timestamps set the arrivals" sim --dataset mooncake:"$tmp/moon.jsonl" --aps 1 --quiet
expect_exit2 "--time-scale applies to traces" sim --time-scale 2 --quiet
expect_exit2 "no arrival rate meets the SLO" capacity --model ds27b --dataset 32k --slo-tpot 1 --quiet
expect_exit2 "--tolerance 0" capacity --tolerance 0
expect_exit2 "--seeds 0: give how many workload draws" capacity --seeds 0
expect_exit2 "--capacity-seeds 0: use 1 to 100" paper --capacity-seeds 0 --out "$tmp/paper"
expect_exit2 "--out is required with --figures, --capacity-seeds" paper --capacity-seeds 3
expect_exit2 "replays at its own timestamps" capacity --dataset mooncake:"$tmp/moon.jsonl"
printf '[online]\naps = -1\n' >"$tmp/aps.toml"
expect_exit2 "online.aps" sim --config "$tmp/aps.toml" --quiet
# The live system (issue 17): serve, node and bench live refuse bad input in one line.
root="$(cd "$(dirname "$0")/../.." && pwd)"
printf '[scheduler]\nregister_timeout_s = 1\nport = 0\n' >"$tmp/reg.toml"
printf '[scheduler]\nlease_ttl_ms = 10\n' >"$tmp/lease.toml"
printf '[schedular]\nport = 0\n' >"$tmp/sectypo.toml"
# The DE DRAM tier is live (issue 35); prefetch, recompute and the bounded store are not yet.
cp "$root/configs/emu-1p2d.toml" "$tmp/cache.toml"; printf '\n[cache]\nde_dram_gb = 100\nprefetch = "always"\n' >>"$tmp/cache.toml"
expect_exit2 "cache.prefetch is modelled by the simulator only" serve --config "$tmp/cache.toml" --port 0
expect_exit2 "--duration goes with --aps" bench live --config "$root/configs/emu-2p4d.toml" --duration 10
expect_exit2 "--kill 'decode': write ROLE:INDEX@SECONDS" bench live --config "$root/configs/emu-2p4d.toml" --kill decode
expect_exit2 "the config has 4 decode nodes" bench live --config "$root/configs/emu-2p4d.toml" --kill decode:4@10
expect_exit2 "--aps 0: the arrival rate" bench live --config "$root/configs/emu-2p4d.toml" --aps 0
# bench serve --dataset (a trace through the API): its flags, named.
expect_exit2 "--sessions-per-s goes with --dataset" bench serve --sessions-per-s 1
expect_exit2 "--config is required" bench serve --dataset 32k
expect_exit2 "--length-scale 0: give a positive factor" bench serve --config "$root/configs/emu-1p2d.toml" --dataset 32k --length-scale 0
expect_exit2 "scale them with --time-scale" bench serve --config "$root/configs/emu-1p2d.toml" --dataset mooncake:/no/such.jsonl --sessions-per-s 2
expect_exit2 "is not HOST:PORT" node --scheduler 127.0.0.1 --role decode
expect_error "no scheduler answered at 127.0.0.1:1 within 1 s" node --scheduler 127.0.0.1:1 --role decode --connect-timeout 1
expect_exit2 "--port 0: give a TCP port" serve --port 0
expect_exit2 "must be longer than scheduler.report_interval_ms" serve --config "$tmp/lease.toml"
expect_exit2 "schedular" serve --config "$tmp/sectypo.toml"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# (serve binds its API port before it starts nodes: a free one, not 8000, which may be in use.)
expect_error "3 of 3 nodes did not register within 1 s: prefill node 0, decode node 0" serve --config "$tmp/reg.toml" --external-nodes --port "$(free_port)"
# The HTTP front's flags (issue 32): each mistake stops serve before anything starts (exit 2;
# checked for two, the rest once each: the ASan run of this script is near its timeout).
printf 'not a certificate\n' >"$tmp/junk.pem"
expect_exit2 "HTTPS needs both --ssl-certfile" serve --ssl-certfile "$tmp/junk.pem"
expect_error "--ssl-keyfile /no/key.pem: no such file" serve --ssl-certfile "$tmp/junk.pem" --ssl-keyfile /no/key.pem
expect_exit2 "cannot load a PEM certificate chain" serve --ssl-certfile "$tmp/junk.pem" --ssl-keyfile "$tmp/junk.pem"
expect_error "the one parser here is hermes" serve --tool-call-parser mistral
expect_error "--request-timeout -1" serve --request-timeout -1
expect_error "--max-connections 0" serve --max-connections 0
# (Waits up to 180 s for ready: under heavy load, as in a parallel sanitizer run, starting
# three node processes has taken over a minute.)
# serve refuses a non-loopback --host without API keys; with keys (and on the embedded defaults)
# it prints a ready line on stdout and stops cleanly on SIGINT with no node process left behind.
expect_exit2 "--host 0.0.0.0 without --api-keys would let anyone" serve --host 0.0.0.0 --scheduler-port 0
printf '[[keys]]\nname = "a"\nkey = "long-enough-key"\nscopes = ["chat"]\n' >"$tmp/keys.toml"
printf '[[keys]]\nname = "a"\nkey = "long-enough-key"\nscopes = ["chats"]\n' >"$tmp/badkeys.toml"
expect_exit2 "\"chats\" is not a scope" serve --api-keys "$tmp/badkeys.toml"
expect_exit2 "--model /no/such/dir: not a built-in model (tiny, small) nor a directory" serve --model /no/such/dir
mkdir -p "$tmp/emptyckpt"
expect_exit2 "no config.json there" serve --model "$tmp/emptyckpt"
api_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$bin" serve --host 0.0.0.0 --port "$api_port" --api-keys "$tmp/keys.toml" --scheduler-port 0 >"$tmp/serve.out" 2>"$tmp/serve.err" &
serve_pid=$!
for _ in $(seq 1 360); do grep -q ready "$tmp/serve.out" 2>/dev/null && break; sleep 0.5; done
node_pids=$(pgrep -P "$serve_pid")
nodes_before=$(echo "$node_pids" | wc -w)
kill -INT "$serve_pid"
wait "$serve_pid"
serve_rc=$?
orphans=0
for p in $node_pids; do kill -0 "$p" 2>/dev/null && orphans=$((orphans + 1)); done
if grep -q "ready: http://0.0.0.0:$api_port/v1 serving 'tiny' (1 API keys); 1 prefill + 2 decode nodes registered" "$tmp/serve.out" &&
   [ "$serve_rc" -eq 0 ] && [ "$nodes_before" -eq 3 ] && [ "$orphans" -eq 0 ]; then
  echo "ok: dualpath serve --host 0.0.0.0 --api-keys -> ready with 3 nodes, exit 0 on SIGINT, no orphans"
else
  echo "FAIL: dualpath serve: rc $serve_rc, $nodes_before node processes, $orphans left"; cat "$tmp/serve.out" "$tmp/serve.err"; fail=1
fi
# An output path that is a link (like --json /dev/stdout) is written through, not replaced.
ln -s "$tmp/target.json" "$tmp/link.json"
if "$bin" sim --agents 4 --quiet --json "$tmp/link.json" >/dev/null 2>&1 && [ -L "$tmp/link.json" ] &&
   grep -q '"jct_s"' "$tmp/target.json"; then
  echo "ok: dualpath sim --json LINK writes through the link"
else
  echo "FAIL: dualpath sim --json LINK replaced the link or wrote nothing"; fail=1
fi
# doctor: errors exit 2 and are lines starting "error:", warnings "warning:"; serve refuses to start
# on the same errors (the deployment guide's troubleshooting list, src/serve/doctor.h).
printf '[transport.traffic]\nmodel_weight = 1\nkv_weight = 50\n' >"$tmp/qos.toml"
printf '[cluster]\nprefill_nodes = 8\ndecode_nodes = 1\n[live]\npe_dram_buffer_mb = 8\nde_dram_buffer_mb = 8\nhbm_mb = 8\n' >"$tmp/pd.toml"
expect_doctor() {  # expect_doctor WANT_RC "line it must print" config
  "$bin" doctor --config "$3" >"$tmp/out" 2>&1
  local rc=$?
  if [ "$rc" -ne "$1" ] || ! grep -q -- "$2" "$tmp/out"; then
    echo "FAIL: dualpath doctor --config $3 exited $rc (want $1 and '$2'):"; cat "$tmp/out"; fail=1
    return
  fi
  echo "ok: dualpath doctor --config $3 -> exit $rc, $(grep -- "$2" "$tmp/out" | cut -c1-70)"
}
expect_doctor 2 '^error: qos: transport.traffic.kv_weight = 50' "$tmp/qos.toml"
expect_doctor 0 '^warning: pd: P/D = 8 (8P1D) is outside' "$tmp/pd.toml"
expect_error "error: qos" serve --config "$tmp/qos.toml" --port 1
[ "$fail" -eq 0 ] && echo "passed, 0 failed"
exit "$fail"
