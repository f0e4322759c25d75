#!/usr/bin/env python3
"""Reads a `dualpath bench serve --save-result` file the way vLLM's own tools read theirs.

vLLM's result files are read field by field by its sweep and plotting helpers (vllm bench sweep:
summary rows keyed by any field, request_rate "inf" made a float; plot_pareto: output_throughput
and max_concurrency; the timeline plot: start_times, ttfts, itls, input_lens, output_lens, in
seconds; the CI's markdown converter: model_id, completed, max_concurrency, request_throughput,
total_token_throughput, output_throughput, {mean,median,p99,std}_{ttft,tpot}_ms and
{mean,median,p99}_itl_ms). This script does the same reads and checks that each value has the
type and the relations vLLM's files have. Exit 0 when every check passes; prints what failed.

usage: vllm_result_check.py FILE [EXPECTED_REQUESTS]
"""
import json
import math
import sys


def main():
    path = sys.argv[1]
    expected = int(sys.argv[2]) if len(sys.argv) > 2 else None
    with open(path) as f:
        r = json.load(f)
    bad = []

    def check(ok, what):
        if not ok:
            bad.append(what)

    # The CI converter's columns.
    for k in ["model_id", "completed", "max_concurrency", "request_throughput",
              "total_token_throughput", "output_throughput"]:
        check(k in r, f"missing {k}")
    for metric in ["ttft", "tpot"]:
        for stat in ["mean", "median", "p99", "std"]:
            k = f"{stat}_{metric}_ms"
            check(isinstance(r.get(k), (int, float)), f"{k} is not a number")
    for stat in ["mean", "median", "p99"]:
        check(isinstance(r.get(f"{stat}_itl_ms"), (int, float)), f"{stat}_itl_ms")
    check(isinstance(r.get("p99_e2el_ms"), (int, float)), "p99_e2el_ms (sweep's default y)")
    # The sweep's float conversion of request_rate.
    rate = r.get("request_rate")
    rate = float(rate) if isinstance(rate, str) else rate
    check(isinstance(rate, float) and (math.isinf(rate) or rate > 0), "request_rate")
    # The timeline plot's per-request lists, in seconds.
    n = r.get("num_prompts")
    lists = ["input_lens", "output_lens", "ttfts", "itls", "latencies", "start_times",
             "generated_texts", "errors"]
    for k in lists:
        check(isinstance(r.get(k), list) and len(r[k]) == n, f"{k} has not num_prompts entries")
    if bad:
        print("\n".join(bad))
        return 1
    check(r["completed"] + r["failed"] == n, "completed + failed != num_prompts")
    if expected is not None:
        check(n == expected, f"num_prompts {n}, expected {expected}")
    check(r["completed"] > 0, "nothing completed")
    check(all(isinstance(x, list) for x in r["itls"]), "itls is not a list of lists")
    ok = [i for i, e in enumerate(r["errors"]) if e == ""]
    check(len(ok) == r["completed"], "errors: one empty string per completed request")
    # Seconds, not milliseconds: each TTFT is below its latency, and the means agree.
    check(all(0 < r["ttfts"][i] <= r["latencies"][i] for i in ok), "ttfts within latencies")
    mean_ttft_s = sum(r["ttfts"][i] for i in ok) / len(ok)
    check(abs(mean_ttft_s * 1000 - r["mean_ttft_ms"]) <= 1e-6 * max(1.0, r["mean_ttft_ms"]),
          "mean_ttft_ms is not the mean of ttfts in ms")
    check(r["median_ttft_ms"] <= r["p99_ttft_ms"], "median above p99")
    check(sum(r["output_lens"]) == r["total_output_tokens"], "output_lens do not add up")
    check(sum(r["input_lens"][i] for i in ok) == r["total_input_tokens"], "input_lens")
    tput = r["total_output_tokens"] / r["duration"]
    check(abs(tput - r["output_throughput"]) <= 1e-6 * tput, "output_throughput")
    starts = r["start_times"]
    check(all(s >= 0 for s in starts) and max(starts) <= r["duration"], "start_times")
    check(1 <= r["max_concurrent_requests"] <= max(1, r["max_concurrency"]),
          "max_concurrent_requests above max_concurrency")
    if bad:
        print("\n".join(bad))
        return 1
    print(f"{path}: vLLM's fields read: {r['completed']} requests, "
          f"output {r['output_throughput']:.1f} tok/s, TTFT median {r['median_ttft_ms']:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
