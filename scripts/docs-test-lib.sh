# Sourced by the cram files that scripts/docs_test.py writes (docs/docs-test.md): runs one
# document's blocks in one bash session and records a verdict per block. Not a program.
#   dt_init DOC SCRATCH RESULTS PORT   once, first
#   dt_needs PATH                      before a block: the path must exist (else the block fails)
#   dt_run WHERE LINE FILE             a run block: source FILE here, output to a file
#   dt_server WHERE LINE FILE TIMEOUT  a server block: FILE in the background until `ready`
#   dt_expect KIND ARG                 a check on the block just run
#   dt_end                             the block's verdict: prints `ok WHERE` or `FAIL WHERE: why`
#   dt_skip WHERE REASON               a skipped block
#   dt_finish                          stops the server, last

dt_init() {
  DT_DOC=$1; DT_SCRATCH=$2; DT_RESULTS=$3; DT_PORT=$4
  DT_META=$(dirname "$DT_RESULTS"); DT_SERVER_PID=""; DT_PENDING=""
  : > "$DT_RESULTS"
  cd "$DT_SCRATCH" || return 1
  set -a   # the blocks' variables reach later blocks and the servers they start
  trap 'dt_stop_server' EXIT
  dt_reset
}

dt_reset() {
  DT_WHERE=""; DT_RC=0; DT_CMD=""; DT_ERRLINE=""; DT_WANT_RC=0; DT_WHY=""; DT_NOTE=""
  DT_T0=$EPOCHREALTIME; DT_OUT=/dev/null; DT_FILE=""; DT_BLOCK_LINE=0; DT_ERRSIZE=""
}

dt_on_err() {
  # the first failure: its status, command, line, and how much output there was by then (the
  # excerpt ends there, with the failing command's own message)
  if [ "$DT_RC" = 0 ]; then
    DT_RC=$1; DT_CMD=$2; DT_ERRLINE=$3; DT_ERRSIZE=$(stat -c %s "$DT_OUT" 2> /dev/null)
  fi
}

dt_needs() {
  local p=$1
  # shellcheck disable=SC2086
  if ! compgen -G "$p" > /dev/null && [ ! -e "$p" ]; then
    DT_PENDING+="needs $p, which does not exist; "
  fi
}

dt_run() {
  DT_WHERE=$1; DT_BLOCK_LINE=$2; DT_FILE=$3; DT_OUT="$DT_META/out-$2"; DT_T0=$EPOCHREALTIME
  DT_RC=0; DT_CMD=""; DT_ERRLINE=""; DT_ERRSIZE=""
  if [ -n "$DT_PENDING" ]; then DT_WHY=$DT_PENDING; DT_PENDING=""; return 0; fi
  set -o pipefail
  trap 'dt_on_err $? "$BASH_COMMAND" $LINENO' ERR
  { . "$DT_FILE"; } > "$DT_OUT" 2>&1 < /dev/null
  trap - ERR
  set +o pipefail
  return 0
}

dt_stop_server() {
  [ -n "$DT_SERVER_PID" ] || return 0
  local pid=$DT_SERVER_PID i
  DT_SERVER_PID=""
  # SIGTERM (serve stops its nodes cleanly), to the whole group; SIGINT would not do: a
  # background job of a non-interactive shell ignores it
  kill -TERM -- "-$pid" 2> /dev/null
  for i in $(seq 1 200); do kill -0 -- "-$pid" 2> /dev/null || break; sleep 0.1; done
  kill -KILL -- "-$pid" 2> /dev/null
  wait "$pid" 2> /dev/null
  rm -f "$DT_META/server.pgid"
  return 0
}

dt_server() {
  DT_WHERE=$1; DT_BLOCK_LINE=$2; DT_FILE=$3; DT_OUT="$DT_META/out-$2"; DT_T0=$EPOCHREALTIME
  local timeout=$4 i code
  dt_stop_server
  if [ -n "$DT_PENDING" ]; then DT_WHY=$DT_PENDING; DT_PENDING=""; return 0; fi
  setsid bash "$DT_FILE" > "$DT_OUT" 2>&1 < /dev/null &
  DT_SERVER_PID=$!
  echo "$DT_SERVER_PID" > "$DT_META/server.pgid"   # for the harness, should this shell be killed
  for i in $(seq 1 $((timeout * 5))); do
    if grep -q ready "$DT_OUT"; then DT_NOTE="ready"; return 0; fi
    if ! kill -0 "$DT_SERVER_PID" 2> /dev/null; then
      wait "$DT_SERVER_PID"; DT_RC=$?; DT_SERVER_PID=""
      DT_WHY+="the server exited (status $DT_RC) before it was ready; "
      return 0
    fi
    code=$(curl -sk -o /dev/null -w '%{http_code}' "http://127.0.0.1:$DT_PORT/health" 2> /dev/null)
    [ "$code" = 000 ] && code=$(curl -sk -o /dev/null -w '%{http_code}' "https://127.0.0.1:$DT_PORT/health" 2> /dev/null)
    if [ "$code" = 200 ]; then   # healthy: give its ready line a moment to reach the log
      for i in $(seq 1 20); do grep -q ready "$DT_OUT" && break; sleep 0.1; done
      DT_NOTE="GET /health 200 on port $DT_PORT"; return 0
    fi
    sleep 0.2
  done
  DT_WHY+="not ready after $timeout s; "
  return 0
}

dt_expect() {
  local kind=$1 arg=$2 file expr
  case "$kind" in
    exit) DT_WANT_RC=$arg ;;
    grep) grep -Eq -- "$arg" "$DT_OUT" || DT_WHY+="no line of the output matches /$arg/; " ;;
    no-grep) ! grep -Eq -- "$arg" "$DT_OUT" || DT_WHY+="a line of the output matches /$arg/: $(grep -Em1 -- "$arg" "$DT_OUT"); " ;;
    json) jq -e -s "$arg" < "$DT_OUT" > /dev/null 2>&1 || DT_WHY+="the output's JSON fails: $arg; " ;;
    jq-file)
      file=${arg%% *}; expr=${arg#* }
      if [ ! -f "$file" ]; then DT_WHY+="no file $file; "
      else jq -e "$expr" "$file" > /dev/null 2>&1 || DT_WHY+="$file fails: $expr; "; fi ;;
    file) [ -s "$arg" ] || DT_WHY+="the block did not write $arg; " ;;
    mode)
      file=${arg%% *}; expr=${arg#* }
      [ "$(stat -c %a "$file" 2> /dev/null)" = "$expr" ] ||
        DT_WHY+="$file has mode $(stat -c %a "$file" 2> /dev/null || echo '(none)'), not $expr; " ;;
    *) DT_WHY+="unknown expectation $kind; " ;;
  esac
  return 0
}

dt_end() {
  local secs excerpt lines=${DOCS_TEST_EXCERPT_LINES:-15}
  secs=$(printf '%.1f' "$(echo "$EPOCHREALTIME - $DT_T0" | bc)")
  if [ "$DT_RC" != "$DT_WANT_RC" ]; then
    if [ "$DT_RC" != 0 ] && [ -n "$DT_CMD" ]; then
      DT_WHY="exit status $DT_RC (the docs expect $DT_WANT_RC) from line $((DT_BLOCK_LINE + DT_ERRLINE)): $DT_CMD; $DT_WHY"
    else
      DT_WHY="exit status $DT_RC (the docs expect $DT_WANT_RC); $DT_WHY"
    fi
  fi
  excerpt="$DT_META/excerpt-$DT_BLOCK_LINE"
  if [ -z "$DT_WHY" ]; then
    printf 'ok\t%s\t%s\t%s\t\n' "$DT_WHERE" "$secs" "$DT_NOTE" >> "$DT_RESULTS"
    echo "ok $DT_WHERE"
  else
    DT_WHY=${DT_WHY%; }
    if [ -n "$DT_ERRSIZE" ] && [ "$DT_RC" != "$DT_WANT_RC" ]; then
      head -c "$DT_ERRSIZE" "$DT_OUT" | tail -n "$lines" > "$excerpt" 2> /dev/null
    else
      tail -n "$lines" "$DT_OUT" > "$excerpt" 2> /dev/null
    fi
    printf 'FAIL\t%s\t%s\t%s\t%s\n' "$DT_WHERE" "$secs" "$DT_WHY" "$excerpt" >> "$DT_RESULTS"
    echo "FAIL $DT_WHERE: $DT_WHY"
    sed 's/^/  | /' "$excerpt"
  fi
  dt_reset
  return 0
}

dt_skip() {
  printf 'skip\t%s\t0\t%s\t\n' "$1" "$2" >> "$DT_RESULTS"
  return 0
}

dt_finish() {
  dt_stop_server
  return 0
}
