#!/usr/bin/env python3
"""Multi-turn chat sessions against an OpenAI-compatible API, for the network-fault tests.

Each session sends TURNS chat turns in order (or keeps chatting for DURATION seconds), each with the conversation so far plus the reply,
greedy, MAX_TOKENS tokens; SESSIONS sessions run at once. Every request's status, latency,
attempts, cached tokens and reply text go to OUT as JSON lines; a request that fails (no
answer, a non-200 status) is recorded with its error and its session goes on with the next turn.

  chat_load.py --url http://127.0.0.1:8000 --sessions 6 --turns 6 --max-tokens 24 --out FILE
"""
import argparse
import json
import threading
import time
import urllib.error
import urllib.request


def chat(url, messages, max_tokens, timeout_s):
    body = json.dumps({"model": "tiny", "messages": messages, "max_tokens": max_tokens,
                       "temperature": 0}).encode()
    req = urllib.request.Request(url + "/v1/chat/completions", data=body,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout_s) as r:
        return r.status, json.loads(r.read())


def session(args, s, out, lock):
    messages = []
    end = time.time() + args.duration if args.duration > 0 else None
    t = -1
    while True:
        t += 1
        if end is None and t >= args.turns:
            break
        if end is not None and (time.time() >= end or t >= 200):
            break
        messages.append({"role": "user",
                         "content": f"session {s} turn {t}: tell me about page {s * 31 + t}"})
        record = {"session": s, "turn": t, "start": time.time()}
        try:
            status, reply = chat(args.url, messages, args.max_tokens, args.timeout)
            text = reply["choices"][0]["message"]["content"]
            d = reply.get("dualpath", {})
            record.update(status=status, text=text, attempts=d.get("attempts"),
                          migrated=d.get("migrated"), read_path=d.get("read_path"),
                          cached=reply["usage"].get("prompt_tokens_details", {}).get("cached_tokens"),
                          prompt_tokens=reply["usage"]["prompt_tokens"])
            messages.append({"role": "assistant", "content": text})
        except urllib.error.HTTPError as e:
            record.update(status=e.code, error=e.read().decode(errors="replace")[:300])
            messages.pop()
        except Exception as e:  # the server went away: a failed request, recorded
            record.update(status=0, error=repr(e)[:300])
            messages.pop()
        record["latency_s"] = time.time() - record["start"]
        with lock:
            out.write(json.dumps(record) + "\n")
            out.flush()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--url", default="http://127.0.0.1:8000")
    p.add_argument("--sessions", type=int, default=6)
    p.add_argument("--turns", type=int, default=6)
    p.add_argument("--max-tokens", type=int, default=24)
    p.add_argument("--timeout", type=float, default=120)
    p.add_argument("--duration", type=float, default=0,
                   help="seconds each session keeps chatting (instead of --turns)")
    p.add_argument("--out", required=True)
    args = p.parse_args()
    lock = threading.Lock()
    with open(args.out, "w") as out:
        threads = [threading.Thread(target=session, args=(args, s, out, lock))
                   for s in range(args.sessions)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()


if __name__ == "__main__":
    main()
