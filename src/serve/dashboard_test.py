#!/usr/bin/env python3
"""GET /dashboard in a real browser (issue 34, item 4): Debian's chromium, headless, driven over
the DevTools protocol (--remote-debugging-pipe), against `dualpath serve --config
configs/emu-1p2d.toml` with API keys, under a load of multi-turn chat sessions shaped like
`dualpath bench serve`'s (a long first message, then short appends that hit its KV).

What it checks:
  - keys: /dashboard without a key is 401 with `WWW-Authenticate: Basic realm="dualpath"`; the
    browser's prompt is answered with the key as the password (Fetch.authRequired, once), and
    the page's own requests to /metrics carry that credential (the page fills in); a key without
    the metrics scope is 403; bearer works too; unknown paths under /dashboard are 404;
  - the page: no script error, no policy violation, no request to another origin;
  - under load: every figure the page shows from /metrics (data-metric) that is a counter lies
    between two scrapes bracketing the page's fetch; the nodes and their roles are the scrape's;
  - at rest (load over, the counters still): every figure equals a scrape, gauges included, and
    the page's TTFT p50/p99 since start equal histogram_quantile computed here from the scrape;
  - both read paths carried bytes, and the page's KV chart drew both moving; a screenshot
    (1400x1000 PNG) is written to --screenshot (docs/observe-dashboard.png is one).
No timing is asserted. Exit 77 (skip) without chromium (scripts/install-deps.sh installs it).

  dashboard_test.py PATH/TO/dualpath PATH/TO/configs/emu-1p2d.toml [--screenshot OUT.png]
                    [--load-seconds S]   (longer: more history in the screenshot)
"""

import argparse
import base64
import json
import math
import os
import random
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

KEY = "dashboard-test-ops-key"        # scopes: metrics, chat
CHAT_KEY = "dashboard-test-chat-key"  # scope: chat only
LOAD_SECONDS = 16                     # the load while the page watches (--load-seconds)
SESSIONS = 4                          # concurrent chat sessions
CONTEXT_BYTES = 3000                  # a session's first message (one token per byte)
APPEND_BYTES = 200                    # each later turn's new message

failures = []


def check(what, ok, detail=""):
    print(("ok: " if ok else "FAIL: ") + what + ("" if ok or not detail else f" ({detail})"),
          flush=True)
    if not ok:
        failures.append(what)
    return ok


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(method, url, headers=None, body=None, timeout=60):
    """(status, headers, body bytes); 4xx/5xx are answers, not exceptions."""
    req = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


# ---- the Prometheus text format, read independently of the page's parser -----------------------
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)",?')


def parse_metrics(text):
    out = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        if not m:
            continue
        labels = {k: re.sub(r'\\(.)', lambda x: "\n" if x.group(1) == "n" else x.group(1), v)
                  for k, v in LABEL.findall(m.group(2) or "")}
        out.append((m.group(1), labels, float(m.group(3))))
    return out


def metric_sum(samples, name, labels):
    return sum(v for n, l, v in samples
               if n == name and all(l.get(k) == x for k, x in labels.items()))


def histogram_quantile(q, samples, name):
    """Prometheus's bucketQuantile (promql/quantile.go) on the cumulative buckets of `name`."""
    buckets = sorted((float(l["le"]), v) for n, l, v in samples if n == name + "_bucket")
    if len(buckets) < 2 or buckets[-1][0] != math.inf:
        return math.nan
    counts = [c for _, c in buckets]
    for i in range(1, len(counts)):
        counts[i] = max(counts[i], counts[i - 1])
    observations = counts[-1]
    if observations == 0:
        return math.nan
    rank = q * observations
    b = 0
    while b < len(buckets) - 1 and counts[b] < rank:
        b += 1
    if b == len(buckets) - 1:
        return buckets[-2][0]
    if b == 0 and buckets[0][0] <= 0:
        return buckets[0][0]
    start, end, count = 0.0, buckets[b][0], counts[b]
    if b > 0:
        start = buckets[b - 1][0]
        count -= counts[b - 1]
        rank -= counts[b - 1]
    return start + (end - start) * (rank / count)


# ---- a DevTools protocol client over --remote-debugging-pipe (fd 3: to chromium, fd 4: from) --
class Chromium:
    def __init__(self, tmp):
        to_r, self._to_w = os.pipe()
        self._from_r, from_w = os.pipe()
        self.log = open(os.path.join(tmp, "chromium.log"), "wb")
        args = ["chromium", "--headless", "--no-sandbox", "--disable-gpu",
                "--remote-debugging-pipe", f"--user-data-dir={tmp}/profile",
                "--window-size=1400,1000", "--hide-scrollbars", "--no-first-run",
                "--no-default-browser-check", "--disable-extensions", "--disable-sync",
                "--disable-background-networking", "--disable-component-update",
                "--password-store=basic", "--use-mock-keychain", "about:blank"]
        actions = [(os.POSIX_SPAWN_DUP2, to_r, 3), (os.POSIX_SPAWN_DUP2, from_w, 4),
                   (os.POSIX_SPAWN_DUP2, self.log.fileno(), 1),
                   (os.POSIX_SPAWN_DUP2, self.log.fileno(), 2),
                   (os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0)]
        self.pid = os.posix_spawnp("chromium", args, os.environ, file_actions=actions,
                                   setsid=True)
        os.close(to_r)
        os.close(from_w)
        self._id = 0
        self._lock = threading.Lock()
        self._waiters = {}  # id -> [event, reply]
        self.handlers = {}  # method -> fn(params, session_id)
        self.events = []    # (method, params)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        buf = b""
        while True:
            try:
                chunk = os.read(self._from_r, 1 << 20)
            except OSError:
                chunk = b""
            if not chunk:
                for w in list(self._waiters.values()):
                    w[1] = {"error": {"message": "chromium closed its pipe"}}
                    w[0].set()
                return
            buf += chunk
            while b"\0" in buf:
                raw, buf = buf.split(b"\0", 1)
                msg = json.loads(raw)
                if "id" in msg:
                    w = self._waiters.pop(msg["id"], None)
                    if w:
                        w[1] = msg
                        w[0].set()
                else:
                    self.events.append((msg["method"], msg.get("params", {})))
                    h = self.handlers.get(msg["method"])
                    if h:
                        h(msg.get("params", {}), msg.get("sessionId"))

    def send(self, method, params=None, session=None, wait=True, timeout=30):
        with self._lock:
            self._id += 1
            mid = self._id
            w = [threading.Event(), None]
            if wait:
                self._waiters[mid] = w
            msg = {"id": mid, "method": method, "params": params or {}}
            if session:
                msg["sessionId"] = session
            os.write(self._to_w, json.dumps(msg).encode() + b"\0")
        if not wait:
            return None
        if not w[0].wait(timeout):
            raise RuntimeError(f"chromium did not answer {method} within {timeout} s")
        if "error" in w[1]:
            raise RuntimeError(f"{method}: {w[1]['error']}")
        return w[1].get("result", {})

    def close(self):
        try:
            self.send("Browser.close", timeout=10)
        except Exception:  # noqa: BLE001 (already gone)
            pass
        for _ in range(100):
            if os.waitpid(self.pid, os.WNOHANG)[0] != 0:
                break
            time.sleep(0.1)
        else:
            os.killpg(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)


# ---- load: chat sessions through the API, as bench serve's clients send them ------------------
WORDS = ("the block store reads cached keys and values from its storage nic while the decode "
         "node forwards each layer over the compute network so both paths carry bytes").split()


def text(rng, n):
    out = []
    while sum(len(w) + 1 for w in out) < n:
        out.append(rng.choice(WORDS))
    return " ".join(out)[:n]


class Load:
    def __init__(self, base):
        self.base = base
        self.stop = threading.Event()
        self.turns = 0
        self.errors = []
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self._client, args=(k,), daemon=True)
                        for k in range(SESSIONS)]

    def start(self):
        for t in self.threads:
            t.start()

    def finish(self):
        self.stop.set()
        for t in self.threads:
            t.join(120)

    def _client(self, k):
        rng = random.Random(k)
        session = 0
        while not self.stop.is_set():
            session += 1
            messages = [{"role": "user",
                         "content": f"client {k} session {session}: " + text(rng, CONTEXT_BYTES)}]
            for _ in range(4):
                if self.stop.is_set():
                    return
                body = json.dumps({"messages": messages, "max_tokens": 16}).encode()
                status, _, out = http("POST", self.base + "/v1/chat/completions",
                                      {"Authorization": f"Bearer {KEY}",
                                       "Content-Type": "application/json"}, body, timeout=120)
                if status != 200:
                    with self.lock:
                        self.errors.append(f"{status}: {out[:200]!r}")
                    return
                reply = json.loads(out)["choices"][0]["message"]["content"]
                with self.lock:
                    self.turns += 1
                messages += [{"role": "assistant", "content": reply},
                             {"role": "user", "content": text(rng, APPEND_BYTES)}]


# ---- the page as the browser rendered it -------------------------------------------------------
READ_PAGE = """JSON.stringify({
  polls: Number(document.getElementById('about').dataset.polls || 0),
  status: document.getElementById('status').dataset.state,
  statusText: document.getElementById('status').textContent,
  figures: [...document.querySelectorAll('[data-metric]')].map(e => ({
    metric: e.dataset.metric, labels: JSON.parse(e.dataset.labels),
    value: e.dataset.value, text: e.textContent})),
  quantiles: [...document.querySelectorAll('[data-quantile]')].map(e => ({
    histogram: e.dataset.histogram, q: Number(e.dataset.quantile), value: e.dataset.value})),
  nodes: [...document.querySelectorAll('tr[data-node]')].map(e => [e.dataset.node, e.dataset.role]),
  kvSeries: Object.fromEntries([...document.querySelectorAll('#chart-kv path[data-series]')]
      .map(e => [e.dataset.series, Number(e.dataset.nonzero)])),
})"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dualpath")
    ap.add_argument("config")
    ap.add_argument("--screenshot", help="write the page under load here (PNG, 1400x1000)")
    ap.add_argument("--load-seconds", type=float, default=LOAD_SECONDS,
                    help=f"how long the page watches the load (default {LOAD_SECONDS})")
    args = ap.parse_args()
    if shutil.which("chromium") is None:
        print("SKIP: no chromium (scripts/install-deps.sh installs it)")
        return 77
    t0 = time.monotonic()
    tmp = tempfile.mkdtemp(prefix="dp-dashboard-")
    serve = browser = load = None
    try:
        keys = os.path.join(tmp, "keys.toml")
        with open(keys, "w") as f:
            f.write(f'[[keys]]\nname = "ops"\nkey = "{KEY}"\nscopes = ["metrics", "chat"]\n'
                    f'[[keys]]\nname = "chatter"\nkey = "{CHAT_KEY}"\nscopes = ["chat"]\n')
        os.chmod(keys, 0o600)
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        out = open(os.path.join(tmp, "serve.out"), "w+")
        err = open(os.path.join(tmp, "serve.err"), "w+")
        serve = subprocess.Popen([args.dualpath, "serve", "--config", args.config,
                                  "--port", str(port), "--scheduler-port", "0",
                                  "--api-keys", keys], stdout=out, stderr=err)
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and serve.poll() is None:
            out.seek(0)
            if "ready" in out.read():
                break
            time.sleep(0.2)
        out.seek(0)
        if "ready" not in out.read():
            err.seek(0)
            print("FAIL: serve did not start\n" + err.read()[-3000:])
            return 1
        print(f"serve ready after {time.monotonic() - t0:.1f} s", flush=True)

        def scrape():
            status, _, body = http("GET", base + "/metrics", {"Authorization": f"Bearer {KEY}"})
            assert status == 200, f"/metrics: {status}"
            return parse_metrics(body.decode())

        # Keys, by hand.
        status, headers, _ = http("GET", base + "/dashboard")
        check("/dashboard without a key is 401 asking for Basic credentials",
              status == 401 and headers.get("WWW-Authenticate", "").startswith(
                  'Basic realm="dualpath"'), f"{status} {headers.get('WWW-Authenticate')}")
        basic = "Basic " + base64.b64encode(f"me:{CHAT_KEY}".encode()).decode()
        status, _, _ = http("GET", base + "/dashboard", {"Authorization": basic})
        check("a key without the metrics scope is 403", status == 403, str(status))
        status, headers, page = http("GET", base + "/dashboard",
                                     {"Authorization": f"Bearer {KEY}"})
        check("a bearer key with the metrics scope gets the page",
              status == 200 and headers.get("Content-Type", "").startswith("text/html") and
              b"<script>" in page, str(status))
        status, _, body = http("GET", base + "/dashboard/state",
                               {"Authorization": f"Bearer {KEY}"})
        check("an unknown path under /dashboard is 404 naming the page",
              status == 404 and b"GET /dashboard" in body, f"{status} {body[:200]!r}")

        load = Load(base)
        load.start()

        browser = Chromium(tmp)
        session = None
        auth = []
        requests = []
        problems = []

        def on_paused(p, s):
            browser.send("Fetch.continueRequest", {"requestId": p["requestId"]}, s, wait=False)

        def on_auth(p, s):  # the browser's prompt, answered as a user would: the key as password
            auth.append(p["authChallenge"])
            browser.send("Fetch.continueWithAuth", {
                "requestId": p["requestId"],
                "authChallengeResponse": {"response": "ProvideCredentials",
                                          "username": "operator", "password": KEY}}, s,
                wait=False)

        browser.handlers = {
            "Fetch.requestPaused": on_paused,
            "Fetch.authRequired": on_auth,
            "Network.requestWillBeSent": lambda p, s: requests.append(p["request"]["url"]),
            "Runtime.exceptionThrown": lambda p, s: problems.append(
                json.dumps(p["exceptionDetails"])[:500]),
            "Runtime.consoleAPICalled": lambda p, s: p["type"] == "error" and problems.append(
                json.dumps(p["args"])[:500]),
            "Log.entryAdded": lambda p, s: p["entry"]["level"] == "error" and problems.append(
                p["entry"]["text"][:500]),
        }
        targets = browser.send("Target.getTargets")["targetInfos"]
        page_target = next(t["targetId"] for t in targets if t["type"] == "page")
        session = browser.send("Target.attachToTarget",
                               {"targetId": page_target, "flatten": True})["sessionId"]
        for method, params in [
                ("Runtime.enable", {}), ("Log.enable", {}), ("Network.enable", {}),
                ("Page.enable", {}),
                ("Fetch.enable", {"handleAuthRequests": True, "patterns": [{"urlPattern": "*"}]}),
                ("Emulation.setDeviceMetricsOverride",
                 {"width": 1400, "height": 1000, "deviceScaleFactor": 1, "mobile": False})]:
            browser.send(method, params, session)
        browser.send("Page.navigate", {"url": base + "/dashboard"}, session)

        def read_page():
            r = browser.send("Runtime.evaluate", {"expression": READ_PAGE, "returnByValue": True},
                             session)
            if "exceptionDetails" in r or r.get("result", {}).get("type") != "string":
                return None
            return json.loads(r["result"]["value"])

        def wait_polls(n, timeout=30):
            end = time.monotonic() + timeout
            while time.monotonic() < end:
                p = read_page()
                if p and p["polls"] >= n:
                    return p
                time.sleep(0.1)
            raise RuntimeError(f"the page did not reach {n} scrapes in {timeout} s: "
                               f"{read_page()}")

        first = wait_polls(1)
        check("the page shows the cluster live", first["status"] == "ok", first["statusText"])
        check("the browser asked for the key once, for realm dualpath, by Basic",
              len(auth) == 1 and auth[0].get("scheme", "").lower() == "basic" and
              auth[0].get("realm") == "dualpath", str(auth))

        def compare(page, a, b, exact):
            """Every figure against scrapes a (before the page's fetch) and b (after it)."""
            bad = []
            for f in page["figures"]:
                v = float(f["value"])
                lo = metric_sum(a, f["metric"], f["labels"])
                hi = metric_sum(b, f["metric"], f["labels"])
                if exact:
                    ok = v == lo == hi
                elif f["metric"].endswith(("_total", "_count")):  # counters only go up
                    ok = lo <= v <= hi
                elif f["metric"] == "dualpath:node_up" and lo == hi:  # leases held throughout
                    ok = v == lo
                else:
                    continue  # a load gauge may have moved and come back between the scrapes
                if not ok:
                    bad.append(f"{f['metric']}{f['labels']} page {v} scrapes {lo}..{hi}")
            return bad

        # Under load: brackets around one fetch of the page.
        time.sleep(args.load_seconds / 2)
        a = scrape()
        n = read_page()["polls"]
        page = wait_polls(n + 2)  # n+1 may have begun before `a`; n+2 began after it
        b = scrape()
        bad = compare(page, a, b, exact=False)
        counters = [f for f in page["figures"] if f["metric"].endswith(("_total", "_count"))]
        check(f"under load, the page's {len(counters)} counters lie between the two scrapes "
              f"around its fetch, and its leases equal them", not bad, "; ".join(bad[:5]))
        scraped_nodes = sorted((l["node"], l["role"]) for n, l, v in b
                               if n == "dualpath:node_up")
        check("the page lists the scrape's nodes with their roles",
              sorted(map(tuple, page["nodes"])) == scraped_nodes and len(scraped_nodes) == 3,
              f"{page['nodes']} vs {scraped_nodes}")
        check("the node figures are there (queue, DRAM, lease, both paths per node)",
              len([f for f in page["figures"] if "node" in f["labels"]]) == 5 * 3)

        time.sleep(max(0.0, args.load_seconds / 2 - 2))
        shot_path = args.screenshot or os.path.join(tmp, "dashboard.png")
        shot = base64.b64decode(browser.send("Page.captureScreenshot", {"format": "png"},
                                             session)["data"])
        with open(shot_path, "wb") as f:
            f.write(shot)
        width, height = struct.unpack(">II", shot[16:24])
        check(f"a {width}x{height} screenshot under load in {shot_path}",
              shot[:8] == b"\x89PNG\r\n\x1a\n" and (width, height) == (1400, 1000))
        under_load = read_page()
        load.finish()
        check(f"the load ran ({load.turns} turns, no errors)",
              load.turns > 0 and not load.errors, "; ".join(load.errors[:3]))
        end = scrape()
        pe = metric_sum(end, "dualpath:kv_read_bytes_total", {"path": "pe"})
        de = metric_sum(end, "dualpath:kv_read_bytes_total", {"path": "de"})
        check(f"both read paths carried KV ({pe / 2**20:.1f} MiB PE, {de / 2**20:.1f} MiB DE)",
              pe > 0 and de > 0)
        check("the page's KV chart drew both paths moving",
              under_load["kvSeries"].get("pe", 0) > 0 and under_load["kvSeries"].get("de", 0) > 0,
              str(under_load["kvSeries"]))

        # At rest: the same figures, exactly, and the quantiles.
        def comparable(s):
            return [x for x in s if x[0] != "dualpath:node_last_report_age_seconds"]
        for attempt in range(10):
            a = scrape()
            n = read_page()["polls"]
            page = wait_polls(n + 2)
            b = scrape()
            if comparable(a) == comparable(b):
                break
        bad = compare(page, a, b, exact=True)
        check(f"at rest, all {len(page['figures'])} figures equal the scrape", not bad,
              "; ".join(bad[:5]))
        for qf in page["quantiles"]:
            want = histogram_quantile(qf["q"], b, qf["histogram"])
            got = float(qf["value"])
            check(f"TTFT p{qf['q'] * 100:g} since start: page {got:.6f} s = "
                  f"histogram_quantile {want:.6f} s",
                  math.isfinite(want) and abs(got - want) <= 1e-12 * max(1.0, abs(want)))
        check("requests in flight at rest is 0 on the page",
              any(f["metric"] == "dualpath:num_requests_running" and float(f["value"]) == 0
                  for f in page["figures"]))

        foreign = [u for u in requests if not u.startswith(base + "/")]
        check(f"the page made {len(requests)} requests, all to its own origin", not foreign,
              str(foreign[:3]))
        check("no script error or policy violation in the page", not problems,
              "; ".join(problems[:3]))
    except Exception as e:  # noqa: BLE001 (the test's one catch: say what broke, with the logs)
        check(f"the test ran to its end ({type(e).__name__}: {e})", False)
        for name in ("serve.err", "chromium.log"):
            path = os.path.join(tmp, name)
            if os.path.exists(path):
                with open(path, errors="replace") as f:
                    print(f"--- last lines of {name}:\n" + "".join(f.readlines()[-30:]))
    finally:
        if load:
            load.finish()
        if browser:
            browser.close()
        if serve and serve.poll() is None:
            serve.send_signal(signal.SIGINT)
            try:
                serve.wait(30)
            except subprocess.TimeoutExpired:
                serve.kill()
                serve.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"dashboard test: {time.monotonic() - t0:.0f} s, "
          + ("all passed" if not failures else f"{len(failures)} failed"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
