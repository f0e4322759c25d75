#!/usr/bin/python3
"""The readability check of the built-in model: the share of generated words found in
/usr/share/dict/words (Debian's wamerican), over chat replies from a running `dualpath serve`.

  ./build/dualpath serve --port 8000 &
  scripts/dict_share.py --port 8000
"""
import argparse
import json
import re
import urllib.request

PROMPTS = [
    "What is a database?", "How do I create a table?", "Explain what an index is.",
    "How does a transaction work?", "What does the VACUUM command do?",
    "How are rows deleted?", "What is a primary key?", "Describe the query planner.",
    "How do I open a database file?", "What is a virtual table?", "Why use a journal?",
    "How do I write a SELECT statement?", "What happens on a crash?", "Tell me about types.",
    "What is WAL mode?", "How do triggers work?", "What is a view?", "How big can a blob be?",
    "What does ANALYZE collect?", "How do I join two tables?",
]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--max-tokens", type=int, default=160)
    ap.add_argument("--dict", default="/usr/share/dict/words")
    a = ap.parse_args()
    with open(a.dict, encoding="utf-8", errors="replace") as f:
        words = {w.strip().lower() for w in f if w.strip()}
    found = total = 0
    for p in PROMPTS:
        body = json.dumps({"model": "tiny", "messages": [{"role": "user", "content": p}],
                           "max_tokens": a.max_tokens, "temperature": 0}).encode()
        req = urllib.request.Request(f"http://127.0.0.1:{a.port}/v1/chat/completions", data=body,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=120) as r:
            reply = json.load(r)["choices"][0]["message"]["content"]
        ws = re.findall(r"[A-Za-z]{2,}", reply)  # runs of 2+ letters (single letters all match)
        hit = sum(w.lower() in words for w in ws)
        found += hit
        total += len(ws)
        print(f"> {p}\n  {reply[:200]!r}  ({hit}/{len(ws)} dictionary words)")
    share = found / total if total else 0.0
    print(f"dictionary words: {found}/{total} = {100 * share:.1f}% (of {len(PROMPTS)} replies, "
          f"greedy, max_tokens {a.max_tokens})")


if __name__ == "__main__":
    main()
