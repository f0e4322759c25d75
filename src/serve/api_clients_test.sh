#!/usr/bin/env bash
# The API through real clients, as the deployment guide uses them: `dualpath serve` on the
# embedded defaults with API keys, then curl + jq (models, chat, usage, a second turn's cached
# tokens, 401/403/404, cache_salt), `hey` for a short load, and the official OpenAI Node client
# when it is installed (scripts/install-deps.sh puts it in ~/.cache/dualpath/npm): v4 and the
# current major run an agent's conversation with tools, as does LangChain's ChatOpenAI, over
# HTTP and then over HTTPS (a certificate made here with `openssl req`); SIGINT stops it
# cleanly.
#   api_clients_test.sh PATH/TO/dualpath
set -uo pipefail
bin="$1"
src="$(cd "$(dirname "$0")" && pwd)"
tmp=$(mktemp -d)
fail=0
serve_pid=""
cleanup() { [ -n "$serve_pid" ] && kill -INT "$serve_pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
check() {  # check "what" condition...
  if "${@:2}" >/dev/null; then echo "ok: $1"; else echo "FAIL: $1"; fail=1; fi
}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# start_serve WHAT READY_TEXT ARGS...: `dualpath serve ARGS` in the background (serve_pid), until
# it prints READY_TEXT; exits the test if it does not.
start_serve() {
  local what="$1" ready="$2"
  shift 2
  "$bin" serve "$@" >"$tmp/out" 2>"$tmp/err" &
  serve_pid=$!
  for _ in $(seq 1 360); do grep -q ready "$tmp/out" 2>/dev/null && break; sleep 0.5; done
  if ! grep -q "$ready" "$tmp/out"; then
    echo "FAIL: $what did not print $ready"; cat "$tmp/out" "$tmp/err"; exit 1
  fi
}
port=$(free_port)
full="full-key-$RANDOM$RANDOM"
chat_only="chat-key-$RANDOM$RANDOM"
cat >"$tmp/keys.toml" <<TOML
[[keys]]
name = "admin"
key_sha256 = "$(printf %s "$full" | sha256sum | cut -d' ' -f1)"
scopes = ["models", "chat", "completions", "metrics", "admin"]
[[keys]]
name = "chat-only"
key = "$chat_only"
scopes = ["chat"]
TOML
start_serve serve "ready: http://127.0.0.1:$port/v1" --port "$port" --scheduler-port 0 \
  --api-keys "$tmp/keys.toml" --tool-call-parser hermes
echo "ok: serve prints ready"
base="http://127.0.0.1:$port"
auth=(-H "Authorization: Bearer $full")
# The guide's health check.
ids=$(curl -s "${auth[@]}" "$base/v1/models" | jq -r '.data[].id')
check "curl /v1/models | jq '.data[].id' gives tiny" [ "$ids" = "tiny" ]
question=$(printf 'Summarise the previous tool output. %.0s' $(seq 1 12))
body=$(jq -n --arg q "$question" '{model: "tiny", messages: [{role: "user", content: $q}], max_tokens: 24}')
r1=$(curl -s "${auth[@]}" -H 'Content-Type: application/json' "$base/v1/chat/completions" -d "$body")
echo "$r1" | jq '.usage' >"$tmp/usage1"
check "jq '.usage' has prompt and completion tokens" jq -e '.prompt_tokens > 0 and .completion_tokens == 24' "$tmp/usage1"
reply=$(echo "$r1" | jq -r '.choices[0].message.content')
body2=$(jq -n --arg q "$question" --arg a "$reply" \
  '{model: "tiny", messages: [{role: "user", content: $q}, {role: "assistant", content: $a}, {role: "user", content: "next"}], max_tokens: 4}')
r2=$(curl -s "${auth[@]}" -H 'Content-Type: application/json' "$base/v1/chat/completions" -d "$body2")
p1=$(jq '.prompt_tokens + .completion_tokens' "$tmp/usage1")
cached=$(echo "$r2" | jq '.usage.prompt_tokens_details.cached_tokens')
echo "  turn 1: prompt + reply $p1 tokens; turn 2 cached_tokens $cached ($(echo "$r2" | jq -c .dualpath))"
# Turn 1 stored its prompt and the reply tokens whose KV it computed: all but the last (that one
# was sampled, never run through the model), in whole 64-token blocks. (p1 / 64 * 64 was wrong
# whenever p1 is a multiple of 64; the --model DIR tokenizer, trained on docs/, made it so.)
stored=$(((p1 - 1) / 64 * 64))
check "turn 2 hits turn 1's prompt and reply, all but the last token (block-rounded)" [ "$cached" -ge "$stored" ]
# cache_salt (vLLM's field): the same conversation under two salts shares nothing, and hits in
# full within each.
salted() {  # salted SALT MESSAGES_JSON -> the response
  curl -s "${auth[@]}" -H 'Content-Type: application/json' "$base/v1/chat/completions" \
    -d "$(jq -n --arg s "$1" --argjson m "$2" '{model: "tiny", messages: $m, max_tokens: 8, cache_salt: $s}')"
}
conv=$(jq -n --arg q "Salted conversation. $question" '[{role: "user", content: $q}]')
s1=$(salted tenant-a "$conv")
s1_total=$(echo "$s1" | jq '.usage.prompt_tokens + .usage.completion_tokens')
conv2=$(jq -n --argjson c "$conv" --arg a "$(echo "$s1" | jq -r '.choices[0].message.content')" \
  '$c + [{role: "assistant", content: $a}, {role: "user", content: "more"}]')
other=$(salted tenant-b "$conv2" | jq '.usage.prompt_tokens_details.cached_tokens')
same=$(salted tenant-a "$conv2" | jq '.usage.prompt_tokens_details.cached_tokens')
unsalted=$(curl -s "${auth[@]}" -H 'Content-Type: application/json' "$base/v1/chat/completions" \
  -d "$(jq -n --argjson m "$conv2" '{model: "tiny", messages: $m, max_tokens: 8}')" |
  jq '.usage.prompt_tokens_details.cached_tokens')
echo "  cache_salt: turn 1 under tenant-a $s1_total tokens; turn 2 cached: tenant-b $other, no salt $unsalted, tenant-a $same"
check "cache_salt: another salt (or none) hits nothing of tenant-a's" [ "$other" -eq 0 -a "$unsalted" -eq 0 ]
check "cache_salt: the same salt hits turn 1's prompt and reply (block-rounded)" [ "$same" -ge $(((s1_total - 1) / 64 * 64)) -a "$same" -gt 0 ]
code=$(curl -s -o "$tmp/e401" -w '%{http_code}' "$base/v1/models")
check "no key: 401 with an OpenAI error" [ "$code" = 401 -a "$(jq -r .error.type "$tmp/e401")" = authentication_error ]
code=$(curl -s -o "$tmp/e403" -w '%{http_code}' -H "Authorization: Bearer $chat_only" "$base/v1/models")
check "a key without 'models': 403 naming the scope" grep -q "lacks the scope 'models'" "$tmp/e403"
check "  ... status 403" [ "$code" = 403 ]
code=$(curl -s -o "$tmp/e404" -w '%{http_code}' "${auth[@]}" "$base/v1/chat/completions" -d '{"model": "gpt-4", "messages": [{"role": "user", "content": "x"}]}')
check "an unknown model: 404 model_not_found" [ "$code" = 404 -a "$(jq -r .error.code "$tmp/e404")" = model_not_found ]
check "/health is open" [ "$(curl -s "$base/health" | jq -r .status)" = ok ]
curl -s "${auth[@]}" "$base/metrics" >"$tmp/metrics"
check "/metrics counts the cached prompt tokens" grep -q '^dualpath:prompt_tokens_cached_total [1-9]' "$tmp/metrics"
if command -v hey >/dev/null; then
  hey -z 5s -c 8 -m POST "${auth[@]}" -H 'Content-Type: application/json' \
    -d '{"model": "tiny", "prompt": "load", "max_tokens": 8}' "$base/v1/completions" >"$tmp/hey" 2>&1
  ok=$(sed -n 's/^[[:space:]]*\[200\][[:space:]]*\([0-9]*\) responses/\1/p' "$tmp/hey")
  others=$(grep -E '^[[:space:]]*\[[0-9]+\]' "$tmp/hey" | grep -vc '\[200\]')
  echo "  hey -z 5s -c 8: ${ok:-0} responses 200, $others other statuses; $(grep 'Requests/sec' "$tmp/hey" | xargs)"
  check "hey: every response 200" [ "${ok:-0}" -gt 0 -a "$others" -eq 0 ]
  [ "${ok:-0}" -gt 0 -a "$others" -eq 0 ] || sed -n '/Status code distribution/,$p' "$tmp/hey"
else
  echo "skip: hey is not installed (apt-get install hey)"
fi
npm_dir="${DUALPATH_NPM_DIR:-$HOME/.cache/dualpath/npm}"
if command -v node >/dev/null && [ -d "$npm_dir/node_modules/openai" ]; then
  cp "$src/openai_client_test.mjs" "$npm_dir/openai_client_test.mjs"
  if node "$npm_dir/openai_client_test.mjs" "$base/v1" "$full" "$chat_only" >"$tmp/sdk" 2>&1; then
    echo "ok: the OpenAI Node client: $(cat "$tmp/sdk")"
  else
    echo "FAIL: the OpenAI Node client:"; cat "$tmp/sdk"; fail=1
  fi
else
  echo "skip: the OpenAI Node client is not installed ($npm_dir/node_modules/openai; scripts/install-deps.sh installs it)"
fi
# An agent's conversation with tools through the SDKs: v4, the current major (openai7, an npm
# alias) and LangChain. $1: the base URL; the rest: the environment (NODE_EXTRA_CA_CERTS).
agents() {
  local base_url="$1" label="$2"
  if ! command -v node >/dev/null; then echo "skip: node is not installed"; return; fi
  cp "$src/openai_tools_test.mjs" "$src/langchain_tools_test.mjs" "$npm_dir/"
  for m in openai openai7; do
    if [ ! -d "$npm_dir/node_modules/$m" ]; then echo "skip: $npm_dir/node_modules/$m is not installed"; continue; fi
    if (cd "$npm_dir" && node openai_tools_test.mjs "$m" "$base_url" "$full" "$m-$label") >"$tmp/agent" 2>&1; then
      echo "ok: $label: $m ($(jq -r .version "$npm_dir/node_modules/$m/package.json")) agent conversation: $(tail -1 "$tmp/agent")"
    else
      echo "FAIL: $label: $m agent conversation:"; cat "$tmp/agent"; fail=1
    fi
  done
  if [ -d "$npm_dir/node_modules/@langchain/openai" ]; then
    if (cd "$npm_dir" && node langchain_tools_test.mjs "$base_url" "$full" "langchain-$label") >"$tmp/agent" 2>&1; then
      echo "ok: $label: LangChain ChatOpenAI ($(jq -r .version "$npm_dir/node_modules/@langchain/openai/package.json")) agent conversation: $(tail -1 "$tmp/agent")"
    else
      echo "FAIL: $label: LangChain ChatOpenAI agent conversation:"; cat "$tmp/agent"; fail=1
    fi
  else
    echo "skip: $npm_dir/node_modules/@langchain/openai is not installed"
  fi
}
agents "$base/v1" http
kill -INT "$serve_pid"
wait "$serve_pid"
rc=$?
serve_pid=""
check "SIGINT stops serve with exit 0" [ "$rc" -eq 0 ]
if [ "$fail" -ne 0 ]; then echo "--- serve's stderr (last 40 lines):"; tail -40 "$tmp/err"; fi

# HTTPS (--ssl-certfile / --ssl-keyfile) with a certificate made here, trusted by curl
# (--cacert) and Node (NODE_EXTRA_CA_CERTS).
if command -v openssl >/dev/null; then
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=localhost \
    -addext "subjectAltName=IP:127.0.0.1,DNS:localhost" \
    -keyout "$tmp/key.pem" -out "$tmp/cert.pem" >"$tmp/openssl.log" 2>&1 ||
    { echo "FAIL: openssl req"; cat "$tmp/openssl.log"; exit 1; }
  chmod 600 "$tmp/key.pem"
  port=$(free_port)
  start_serve "serve with TLS" "ready: https://127.0.0.1:$port/v1" --port "$port" \
    --scheduler-port 0 --api-keys "$tmp/keys.toml" --tool-call-parser hermes \
    --ssl-certfile "$tmp/cert.pem" --ssl-keyfile "$tmp/key.pem"
  echo "ok: serve --ssl-certfile/--ssl-keyfile prints ready on https"
  tbase="https://127.0.0.1:$port"
  check "https: curl --cacert /v1/models gives tiny" [ "$(curl -s --cacert "$tmp/cert.pem" "${auth[@]}" "$tbase/v1/models" | jq -r '.data[].id')" = tiny ]
  check "https: a client that does not trust the certificate is refused by its TLS" [ "$(curl -s -o /dev/null -w '%{http_code}' "$tbase/health")" = 000 ]
  check "https: plain HTTP on the TLS port gets no answer" [ "$(curl -s -m 5 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/health")" = 000 ]
  streamed=$(curl -sN --cacert "$tmp/cert.pem" "${auth[@]}" -H 'Content-Type: application/json' "$tbase/v1/chat/completions" \
    -d '{"model": "tiny", "messages": [{"role": "user", "content": "tls"}], "max_tokens": 8, "stream": true}' |
    grep -v '^$' | tail -1)
  check "https: a stream ends with data: [DONE]" [ "$streamed" = "data: [DONE]" ]
  NODE_EXTRA_CA_CERTS="$tmp/cert.pem" agents "$tbase/v1" https
  kill -INT "$serve_pid"
  wait "$serve_pid"
  rc=$?
  serve_pid=""
  check "https: SIGINT stops serve with exit 0" [ "$rc" -eq 0 ]
  if [ "$fail" -ne 0 ]; then echo "--- serve's stderr (last 40 lines):"; tail -40 "$tmp/err"; fi
else
  echo "skip: openssl is not installed: HTTPS not checked"
fi

# `serve --model DIR`: a llama checkpoint (random bf16 weights) whose tokenizer.model spm_train
# trains here on the project's own docs, served and curled as above.
if command -v spm_train >/dev/null; then
  root="$src/../.."
  cat "$root"/README.md "$root"/docs/*.md >"$tmp/corpus.txt"
  spm_train --input="$tmp/corpus.txt" --model_prefix="$tmp/spm" --vocab_size=500 \
    --byte_fallback=true --character_coverage=1.0 --hard_vocab_limit=false --minloglevel=2 \
    >"$tmp/spm.log" 2>&1 || { echo "FAIL: spm_train"; tail "$tmp/spm.log"; exit 1; }
  python3 "$root/scripts/random_llama_checkpoint.py" "$tmp/my-llama" --tokenizer "$tmp/spm.model" \
    --dtype bf16 --vocab 512 >/dev/null
  # A fresh port: the first one may have been taken while it was free (another test's ephemeral
  # port) in the seconds spm_train took.
  port=$(free_port)
  base="http://127.0.0.1:$port"
  start_serve "serve --model DIR" "ready: http://127.0.0.1:$port/v1 serving 'my-llama'" \
    --model "$tmp/my-llama" --port "$port" --scheduler-port 0
  echo "ok: serve --model DIR prints ready ($(grep -o 'sentencepiece[^)]*)' "$tmp/err" | head -1))"
  check "--model DIR: /v1/models lists the directory's name" [ "$(curl -s "$base/v1/models" | jq -r '.data[].id')" = my-llama ]
  body=$(jq -n --arg q "$question" '{model: "my-llama", messages: [{role: "user", content: $q}], max_tokens: 16, temperature: 0}')
  r1=$(curl -s -H 'Content-Type: application/json' "$base/v1/chat/completions" -d "$body")
  reply=$(echo "$r1" | jq -r '.choices[0].message.content')
  p1=$(echo "$r1" | jq '.usage.prompt_tokens + .usage.completion_tokens')
  check "--model DIR: a chat reply with usage" [ "$(echo "$r1" | jq '.usage.completion_tokens')" -gt 0 ]
  body2=$(jq -n --arg q "$question" --arg a "$reply" \
    '{model: "my-llama", messages: [{role: "user", content: $q}, {role: "assistant", content: $a}, {role: "user", content: "next"}], max_tokens: 4, temperature: 0}')
  cached=$(curl -s -H 'Content-Type: application/json' "$base/v1/chat/completions" -d "$body2" | jq '.usage.prompt_tokens_details.cached_tokens')
  echo "  --model DIR: turn 1 prompt + reply $p1 tokens; turn 2 cached_tokens $cached"
  check "--model DIR: turn 2 hits turn 1, all but the last token (block-rounded)" [ "$cached" -ge $(((p1 - 1) / 64 * 64)) -a "$cached" -gt 0 ]
  streamed=$(curl -sN -H 'Content-Type: application/json' "$base/v1/chat/completions" \
    -d "$(echo "$body" | jq '. + {stream: true}')" | sed -n 's/^data: //p' | grep -v '^\[DONE\]$' |
    jq -j '.choices[0].delta.content // ""')
  check "--model DIR: the streamed reply is the same text" [ "$streamed" = "$reply" ]
  kill -INT "$serve_pid"
  wait "$serve_pid"
  rc=$?
  serve_pid=""
  check "--model DIR: SIGINT stops serve with exit 0" [ "$rc" -eq 0 ]
else
  echo "skip: spm_train is not installed (apt-get install sentencepiece): serve --model DIR not checked"
fi
exit $fail
