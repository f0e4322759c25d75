#!/usr/bin/env python3
"""Executable docs: runs the marked shell blocks of the user-facing docs as cram tests.

docs/docs-test.md describes the markers. For each document this script
  1. checks it statically: every shell fence carries a marker, every `--flag` of a
     `dualpath SUB` command line (blocks and inline code) is in `build/dualpath SUB --help`,
     and every repository path it names exists (one test per document);
  2. writes its marked blocks, in order, into one cram file (`DOC.t`, in a temporary
     directory) that runs them in one bash session in a scratch directory of its own, with a
     port of its own, and checks each block's exit status and expectations;
  3. runs `cram` on it and prints `ok DOC:LINE ...` or `FAIL DOC:LINE why` per block.
The last line is `N passed, N failed`. Standard library only.
"""
import argparse
import glob
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = ["README.md", "docs/deploy.md", "docs/api.md", "docs/bench.md", "docs/serve.md"]
SHELL_LANGS = {"sh", "bash", "console", "shell"}
MARK = re.compile(r"^\s*<!--\s*docs-test:(.*?)(-->)?\s*$")
FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*([\w+-]*)")
DOC_PORT = "8000"          # the port the docs write; each document gets a free one instead
SERVER_TIMEOUT_S = 180     # a server block must print `ready` (or answer on its port) by then
DOC_TIMEOUT_S = int(os.environ.get("DOCS_TEST_DOC_TIMEOUT_S", "600"))   # one document's cram run


class Block:
    def __init__(self, doc, line, lang, text):
        self.doc, self.line, self.lang, self.text = doc, line, lang, text
        self.kind = None          # run | skip | server | None (unmarked)
        self.reason = ""
        self.ci_forms = []        # (old, new)
        self.expects = []         # (kind, arg)
        self.needs = []
        self.errors = []          # marker syntax errors

    @property
    def where(self):
        return "%s:%d" % (self.doc, self.line)


def parse_markers(lines, block):
    """The docs-test comments directly above a fence (possibly several, possibly multi-line)."""
    directives = []
    for text in lines:
        for d in text.split("\n"):
            d = d.strip()
            if d:
                directives.append(d)
    for d in directives:
        head, _, rest = d.partition(":")
        head, rest = head.strip(), rest.strip()
        if d in ("run", "server") or head in ("run", "server") and not rest:
            block.kind = d.strip()
        elif head == "skip":
            block.kind, block.reason = "skip", rest or "(no reason given)"
            if not rest:
                block.errors.append("skip needs a reason: <!-- docs-test: skip: REASON -->")
        elif head == "ci-form":
            old, sep, new = rest.partition(" => ")
            if not sep:
                block.errors.append("ci-form needs OLD => NEW: %r" % rest)
            else:
                block.ci_forms.append((old.strip(), new.strip()))
        elif head == "expect":
            kind, _, arg = rest.partition(" ")
            if kind not in ("json", "grep", "no-grep", "exit", "file", "jq-file", "mode"):
                block.errors.append("unknown expect kind %r" % kind)
            block.expects.append((kind, arg.strip()))
        elif head == "needs":
            block.needs.append(rest)
        else:
            block.errors.append("unknown docs-test directive %r" % d)


def parse_doc(doc):
    path = os.path.join(REPO, doc)
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    blocks, prose = [], []
    i = 0
    pending = []        # marker comments seen since the last non-marker line
    while i < len(lines):
        line = lines[i]
        m = FENCE.match(line)
        if m:
            fence, lang = m.group(2), m.group(3).lower()
            body = []
            j = i + 1
            while j < len(lines) and not lines[j].strip().startswith(fence[:3]):
                body.append(lines[j])
                j += 1
            b = Block(doc, i + 1, lang, "\n".join(body))
            if pending:
                parse_markers(pending, b)
            blocks.append(b)
            pending = []
            i = j + 1
            continue
        mm = MARK.match(line)
        if mm:
            text = mm.group(1)
            k = i
            while not mm.group(2) and not line.rstrip().endswith("-->"):
                k += 1
                if k >= len(lines):
                    break
                line = lines[k]
                text += "\n" + line.replace("-->", "")
                if "-->" in line:
                    break
            pending.append(text)
            i = k + 1
            continue
        if line.strip():
            pending = []
        prose.append((i + 1, line))
        i += 1
    return blocks, prose


# ---------------------------------------------------------------- static checks

_help_cache = {}


def help_flags(binary, sub):
    key = tuple(sub)
    if key not in _help_cache:
        r = subprocess.run([binary] + sub + ["--help"], capture_output=True, text=True)
        # One pass over CLI11's help: the flags under "Options:", the names under "Subcommands:".
        flags, subs, section = set(), set(), None
        for l in r.stdout.split("\n"):
            if l.startswith(("Options:", "Subcommands:")):
                section = l.split(":")[0]
                continue
            if section == "Options":
                m = re.match(r"^\s+(?:-\w,)?(--[\w-]+)", l)
                if m:
                    flags.add(m.group(1))
            elif section == "Subcommands":
                m = re.match(r"^  (\w[\w-]*)\s", l)
                if m:
                    subs.add(m.group(1))
        _help_cache[key] = (r.returncode, flags, subs)
    return _help_cache[key]


CMD = re.compile(r"(?:^|[\s`(])(?:\./)?(?:build/)?(dualpath|scripts/run\.sh)\b((?:(?!dualpath)[^`|;&#>\n])*)")


def command_lines(text):
    """Logical command lines of a block (backslash continuations joined), with the offset of
    each one's first line in the block."""
    out, cur, start = [], "", 0
    for k, l in enumerate(text.split("\n")):
        if not cur:
            start = k
        if l.rstrip().endswith("\\"):
            cur += l.rstrip()[:-1] + " "
            continue
        out.append((start, cur + l))
        cur = ""
    if cur:
        out.append((start, cur))
    return out


def check_flags(binary, doc, lineno, text, problems, counter, first=0):
    """lineno: the document's line of the text's first line plus `first` (1 for a block, whose
    text starts after its fence)."""
    for off, cl in command_lines(text):
        for m in CMD.finditer(cl):
            prog, rest = m.group(1), m.group(2)
            words = rest.split()
            sub = []
            if prog == "scripts/run.sh":
                sub = ["demo"] if words[:1] == ["demo"] else ["serve"]
                if words[:1] == ["demo"]:
                    words = words[1:]
            else:
                cur = []
                while words and re.fullmatch(r"[a-z][a-z0-9]*", words[0]):
                    rc, _, subs = help_flags(binary, cur)
                    if words[0] in subs:
                        cur.append(words.pop(0))
                    else:
                        break
                sub = cur
                if not sub:
                    continue
            rc, flags, _ = help_flags(binary, sub)
            for w in words:
                f = re.match(r"^\[?(--[a-z0-9][\w-]*)", w)
                if not f:
                    continue
                counter[0] += 1
                if f.group(1) not in flags:
                    problems.append("%s:%d: `dualpath %s` has no flag %s (build/dualpath %s --help)"
                                    % (doc, lineno + first + off, " ".join(sub), f.group(1),
                                       " ".join(sub)))


def top_dirs():
    """The repository's top-level directories: a path in the docs starting with one is checked."""
    return {e for e in os.listdir(REPO)
            if not e.startswith(".") and os.path.isdir(os.path.join(REPO, e))} | {"build"}


def path_candidates(text, tops):
    alt = "|".join(sorted(re.escape(t) for t in tops))
    pat = re.compile(r"(?<![\w./~-])((?:\.\./shared|%s)/[\w./{},*+-]*)" % alt)
    for m in pat.finditer(text):
        p = m.group(1).rstrip(".,:)")
        if "<" in p or p.endswith("/.."):
            continue
        yield p


def expand_braces(p):
    m = re.search(r"\{([^{}]*)\}", p)
    if not m:
        return [p]
    out = []
    for alt in m.group(1).split(","):
        out += expand_braces(p[:m.start()] + alt + p[m.end():])
    return out


SHARED = os.path.join(os.path.dirname(REPO), "shared")


def unchecked_shared(p):
    """A path in ../shared/ where the repository has no shared folder beside it (a clone made
    elsewhere): the docs say where the traces live; such a path is not checked, and a block
    that needs one is skipped, saying why."""
    return p.startswith("../shared/") and not os.path.isdir(SHARED)


def skip_reason(b):
    """Why a block does not run: its skip marker, or a ../shared/ path it needs that this clone
    has not beside it; None when it runs."""
    if b.kind == "skip":
        return b.reason
    return next(("needs %s: no shared/ folder beside the repository" % n
                 for n in b.needs if unchecked_shared(n)), None)


def path_exists(p):
    for q in expand_braces(p):
        full = os.path.normpath(os.path.join(REPO, q))   # ../shared/ is beside the repository
        if not (glob.glob(full) if any(c in q for c in "*?[") else os.path.exists(full)):
            return False
    return True


OUTPUTS = re.compile(r"(--out|--json|--png|-keyout|-out|--data-dir)\s+$")


def static_check(doc, blocks, prose, binary, strict):
    problems = []
    flags = [0]
    paths = set()
    tops = top_dirs()
    for b in blocks:
        for e in b.errors:
            problems.append("%s: %s" % (b.where, e))
        shellish = b.lang in SHELL_LANGS
        if b.lang == "" and strict:
            problems.append("%s: a fence without a language: write ```sh (and a docs-test marker) "
                            "or ```text" % b.where)
        if shellish and b.kind is None:
            problems.append("%s: unmarked shell block: put <!-- docs-test: run --> (or skip: REASON, "
                            "server) right above it" % b.where)
        if b.kind is not None and not shellish:
            problems.append("%s: a docs-test marker on a ```%s block" % (b.where, b.lang or ""))
        if b.lang in ("text", ""):
            check_flags(binary, doc, b.line, b.text, problems, flags, 1)
        if shellish:
            check_flags(binary, doc, b.line, b.text, problems, flags, 1)
        if True:   # paths: in every block
            for k, l in enumerate(b.text.split("\n")):
                for p in path_candidates(l, tops):
                    # a path a command writes (--out docs/results) need not exist beforehand
                    if OUTPUTS.search(l[: l.find(p)]):
                        continue
                    if unchecked_shared(p):
                        continue
                    paths.add(p)
                    if not path_exists(p):
                        problems.append("%s:%d: no such path %s" % (doc, b.line + 1 + k, p))
        for n in b.needs:
            if unchecked_shared(n):
                continue
            paths.add(n)
            if not path_exists(n):
                problems.append("%s: needs %s, which does not exist" % (b.where, n))
    for lineno, l in prose:
        for code in re.findall(r"`([^`]+)`", l):
            check_flags(binary, doc, lineno, code, problems, flags)
        for p in path_candidates(l, tops):
            if unchecked_shared(p):
                continue
            paths.add(p)
            if not path_exists(p):
                problems.append("%s:%d: no such path %s" % (doc, lineno, p))
    return problems, len(paths), flags[0]


# ---------------------------------------------------------------- the cram file

def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def ci_text(b, port, no_build):
    t = b.text
    for old, new in b.ci_forms:
        if old not in t:
            b.errors.append("ci-form %r: the block has no such text" % old)
        t = t.replace(old, new)
    t = re.sub(r"\b(localhost|127\.0\.0\.1|SERVER_HOST):%s\b" % DOC_PORT, r"\1:%d" % port, t)
    t = re.sub(r"--port %s\b" % DOC_PORT, "--port %d" % port, t)
    if b.kind == "server":
        # the server's own port, and any free port for its nodes' scheduler: flags added to the
        # end of its command, before a trailing comment
        cl = re.sub(r"\\\n\s*", " ", t).strip()
        extra = ""
        if re.search(r"(dualpath serve|scripts/run\.sh)", cl) and "--port" not in cl:
            extra += " --port %d" % port
        if "--external-nodes" not in cl and "--scheduler-port" not in cl:
            extra += " --scheduler-port 0"
        lines = t.rstrip().split("\n")
        last = lines[-1]
        m = re.search(r"\s+#", last)
        lines[-1] = last[:m.start()] + extra + last[m.start():] if m else last + extra
        t = "\n".join(lines)
    if no_build:
        t = re.sub(r"\./scripts/run\.sh demo\b", "./build/dualpath demo", t)
        t = re.sub(r"\./scripts/run\.sh\b", "./build/dualpath serve", t)
    return t


def make_scratch(root, name):
    d = os.path.join(root, name)
    os.makedirs(d)
    for entry in ("build", "configs", "scripts", "models", "docs", "src", "bench"):
        os.symlink(os.path.join(REPO, entry), os.path.join(d, entry))
    return d


def write_cram(doc, blocks, root, port, no_build):
    stem = doc.replace("/", "-").replace(".md", "")
    scratch = make_scratch(root, stem)
    meta = os.path.join(root, stem + ".d")
    os.makedirs(meta)
    results = os.path.join(meta, "results")
    q = shlex.quote
    out = ["%s, in %s (port %d)" % (doc, scratch, port), "",
           "  $ . %s" % q(os.path.join(REPO, "scripts", "docs-test-lib.sh")),
           "  $ dt_init %s %s %s %d" % (q(doc), q(scratch), q(results), port), ""]
    runnable = []
    for b in blocks:
        if b.kind not in ("run", "server", "skip"):
            continue
        reason = skip_reason(b)
        if reason:
            out += ["%s: skip: %s" % (b.where, reason),
                    "  $ dt_skip %s %s" % (q(b.where), q(reason)), ""]
            continue
        text = ci_text(b, port, no_build)
        f = os.path.join(meta, "block-%d.sh" % b.line)
        with open(f, "w") as fh:
            fh.write(text + "\n")
        runnable.append(b)
        out.append("%s: %s" % (b.where, b.kind))
        for n in b.needs:
            out.append("  $ dt_needs %s" % q(n))
        if b.kind == "server":
            out.append("  $ dt_server %s %d %s %d" % (q(b.where), b.line, q(f), SERVER_TIMEOUT_S))
        else:
            out.append("  $ dt_run %s %d %s" % (q(b.where), b.line, q(f)))
        for kind, arg in b.expects:
            out.append("  $ dt_expect %s %s" % (q(kind), q(arg)))
        out.append("  $ dt_end")
        out.append("  ok %s" % b.where)
        out.append("")
    out += ["  $ dt_finish", ""]
    t = os.path.join(root, stem + ".t")
    with open(t, "w") as fh:
        fh.write("\n".join(out))
    return t, results, scratch


# ---------------------------------------------------------------- running

def run_doc(doc, t, results, env, verbose):
    """Runs cram on one document's file, echoing its result lines as they come."""
    cram = shutil.which("cram") or shutil.which("cram3")
    if not cram:
        return [("FAIL", doc, "cram is not installed (apt-get install python3-cram)", "")], ""
    # cram's own tmpdir goes under the document's so that it is removed with it
    proc = subprocess.Popen([cram, "--shell=/bin/bash", "--indent=2", t], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    seen = 0
    recs = []

    def poll():
        nonlocal seen
        if not os.path.exists(results):
            return
        with open(results) as fh:
            lines = fh.read().split("\n")
        for l in lines[seen:-1]:
            verdict, where, secs, why, excerpt = (l.split("\t") + ["", "", "", ""])[:5]
            recs.append((verdict, where, why, secs))
            if verdict == "ok":
                print("ok %s (%s s)%s" % (where, secs, "  " + why if why else ""), flush=True)
            elif verdict == "skip":
                print("skip %s: %s" % (where, why), flush=True)
            else:
                print("FAIL %s (%s s): %s" % (where, secs, why), flush=True)
                if excerpt and os.path.exists(excerpt):
                    with open(excerpt, errors="replace") as fh:
                        text = fh.read().rstrip("\n")
                    for x in text.split("\n") if text.strip() else []:
                        print("       | " + x, flush=True)
        seen = len(lines) - 1

    t0 = time.time()
    try:
        while proc.poll() is None:
            poll()
            if time.time() - t0 > DOC_TIMEOUT_S:
                recs.append(("FAIL", doc, "timed out after %d s" % DOC_TIMEOUT_S, ""))
                print("FAIL %s: timed out after %d s" % (doc, DOC_TIMEOUT_S), flush=True)
                stop_group(proc.pid, proc=proc)
                break
            time.sleep(0.3)
    finally:
        if proc.poll() is None:
            stop_group(proc.pid, proc=proc)
        # a server the session left behind (it was killed before its EXIT trap ran)
        pgid_file = os.path.join(os.path.dirname(results), "server.pgid")
        if os.path.exists(pgid_file):
            try:
                stop_group(int(open(pgid_file).read().strip()))
            except ValueError:
                pass
    output = proc.stdout.read()
    proc.wait()
    poll()
    return recs, output


def stop_group(pgid, grace_s=30, proc=None):
    """SIGTERM to a process group (serve stops its nodes), SIGKILL if it outlives grace_s.
    proc: the group's leader when it is our child (reaped here, or it would count as alive)."""
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return
    t = time.time()
    while time.time() - t < grace_s:
        if proc is not None:
            proc.poll()
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("docs", nargs="*", help="documents (default: %s)" % " ".join(DOCS))
    ap.add_argument("--static", action="store_true", help="only the marker, flag and path checks")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    ap.add_argument("-v", "--verbose", action="store_true", help="print cram's output")
    a = ap.parse_args()
    docs = a.docs or DOCS
    binary = os.path.join(REPO, "build", "dualpath")
    no_build = os.environ.get("DOCS_TEST_NO_BUILD") == "1"
    passed = failed = 0
    if not os.access(binary, os.X_OK):
        print("docs-test: %s is missing: build first (scripts/build.sh)" % binary)
        print("0 passed, 1 failed")
        return 1
    root = tempfile.mkdtemp(prefix="docs-test-")
    # the docs' ../shared/ is beside the repository: so it is beside each scratch directory
    if os.path.isdir(SHARED):
        os.symlink(SHARED, os.path.join(root, "shared"))
    bindir = os.path.join(root, "bin")
    os.makedirs(bindir)
    os.symlink(binary, os.path.join(bindir, "dualpath"))
    env = dict(os.environ)
    env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    env["DOCS_TEST_REPO"] = REPO
    env["DOCS_TEST_EXCERPT_LINES"] = env.get("DOCS_TEST_EXCERPT_LINES", "15")
    try:
        for doc in docs:
            blocks, prose = parse_doc(doc)
            port = free_port()
            t, results, scratch = write_cram(doc, blocks, root, port, no_build)
            strict = True
            problems, npaths, nflags = static_check(doc, blocks, prose, binary, strict)
            ran = fails = skipped = 0
            if problems:
                failed += 1
                print("FAIL %s: %d problem(s) in the prose and blocks:" % (doc, len(problems)))
                for p in problems:
                    print("       " + p)
            else:
                passed += 1
                print("ok %s: markers, %d flags of dualpath commands, %d paths" % (doc, nflags, npaths))
            if not a.static:
                t0 = time.time()
                recs, output = run_doc(doc, t, results, env, a.verbose)
                for verdict, where, why, secs in recs:
                    if verdict == "ok":
                        ran += 1
                    elif verdict == "skip":
                        skipped += 1
                    else:
                        ran += 1
                        fails += 1
                expected = sum(1 for b in blocks
                               if b.kind in ("run", "server") and not skip_reason(b))
                if ran < expected and not any(r[1] == doc for r in recs):
                    fails += 1
                    print("FAIL %s: %d of %d blocks reported; cram said:" % (doc, ran, expected))
                    print("\n".join("       " + l for l in output.split("\n")[-40:]))
                if a.verbose:
                    print(output)
                passed += ran - fails
                failed += fails
                print("%s: %d blocks run (%d failed), %d skipped; %s (%.0f s)"
                      % (doc, ran, fails, skipped,
                         "%d paths in the prose exist" % npaths if not problems else
                         "%d problems in the prose and flags (above)" % len(problems),
                         time.time() - t0), flush=True)
    finally:
        if a.keep:
            print("docs-test: kept %s" % root)
        else:
            shutil.rmtree(root, ignore_errors=True)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
