#!/usr/bin/env python3
"""Checks sluice-replay's HTML report in headless Chromium, offline.

    replay_html_check.py HTML JSON OUTDIR

HTML is what `sluice-replay --html` wrote, JSON what `--json` wrote for the
same run (schema: replay/report_json.h). Chromium runs inside `unshare
--net` (a network namespace of its own with only a loopback that is down,
gone when it exits), so the page provably needs nothing from elsewhere:
once with --dump-dom, once with --screenshot=OUTDIR/replay-report.png.
Every `data-metric` element of the rendered page (convention:
replay/report_html.h) is held to the JSON value at the same path, and every
JSON value the page must show has to be there. Also checked: no tag or
style of the page refers outside it, and the screenshot is a PNG of the
window's size with something drawn on it.

Prints `PASS replay-html: ...` or `FAIL replay-html: ...` with every
mismatch; exits 0 or 1 (2: bad usage). Needs root (unshare) and Debian's
chromium; Python's standard library only.
"""

import html.parser
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile

TIMEOUT_S = 60
WINDOW = (1280, 2400)
MIN_PNG_BYTES = 30_000  # a blank page of this size compresses to ~10 KB
# What the page leaves out of the JSON (report_html.h): the --compare
# policy's refused keys, series and rates.
LEFT_OUT = ("compare.policy.refused_keys", "compare.policy.series", "compare.policy.rates")
OUTCOMES = ("policy", "compare.policy")
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
URL_ATTRS = {"src", "href", "xlink:href", "srcset", "action", "formaction", "poster", "background", "data",
             "manifest", "ping", "cite", "longdesc"}


def normalized(text):
    """A JSON string as the page shows it: control characters but tab as U+FFFD."""
    return "".join("\ufffd" if (ord(c) < 0x20 and c != "\t") or c == "\x7f" else c for c in text)


def flatten(value, path, out):
    """JSON values by the page's paths: arrays by index, rules by rule ("" as "-")."""
    if path in LEFT_OUT:
        return
    prefix = path + "." if path else ""
    if isinstance(value, dict):
        for k, v in value.items():
            flatten(v, prefix + k, out)
    elif isinstance(value, list) and path in (o + ".rules" for o in OUTCOMES):
        for rule in value:
            rest = {k: v for k, v in rule.items() if k != "rule"}
            flatten(rest, prefix + (rule["rule"] or "-"), out)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            flatten(v, prefix + str(i), out)
    else:
        out[path] = value


class Page(html.parser.HTMLParser):
    """The data-metric elements (path -> text, attributes) and every
    reference outside the page (URL attributes, url() and @import in CSS)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.metrics, self.attrs, self.duplicates, self.references = {}, {}, [], []
        self.stack = []  # [tag, path or None, text parts]
        self.in_style = False

    def handle_starttag(self, tag, attrs):
        d = dict(attrs)
        self.check_references(tag, d)
        if tag in VOID:
            return
        self.in_style = tag == "style"
        path = d.get("data-metric")
        if path is not None:
            if path in self.metrics or any(e[1] == path for e in self.stack):
                self.duplicates.append(f"{path}: data-metric twice")
            self.attrs[path] = d
        self.stack.append([tag, path, []])

    def handle_startendtag(self, tag, attrs):
        self.check_references(tag, dict(attrs))

    def handle_endtag(self, tag):
        self.in_style = False
        while self.stack:
            open_tag, path, parts = self.stack.pop()
            if path is not None:
                self.metrics[path] = "".join(parts)
            if open_tag == tag:
                return

    def handle_data(self, data):
        if self.in_style:
            self.check_css(data, "<style>")
        for entry in self.stack:
            if entry[1] is not None:
                entry[2].append(data)

    def check_references(self, tag, attrs):
        for name, value in attrs.items():
            if name in URL_ATTRS and not (value or "").startswith("#"):
                self.references.append(f"<{tag} {name}={value!r}> refers outside the page")
            if name == "style":
                self.check_css(value or "", f"<{tag} style>")
        if tag == "meta" and "http-equiv" in attrs:
            self.references.append(f"<meta http-equiv={attrs['http-equiv']!r}>")

    def check_css(self, css, where):
        lower = css.lower()
        if "@import" in lower:
            self.references.append(f"{where}: @import")
        at = lower.find("url(")
        while at >= 0:
            if not lower[at + 4:].lstrip(" '\"").startswith("#"):
                self.references.append(f"{where}: {css[at:at + 40]!r}")
            at = lower.find("url(", at + 4)


def parse_page(text):
    page = Page()
    page.feed(text)
    page.close()
    return page


def same(text, value):
    """Whether the page's text shows the JSON value (report_html.h's rules)."""
    if isinstance(value, str):
        return text == normalized(value)
    if isinstance(value, bool) or value is None:
        return False
    if isinstance(value, int):
        return text == str(value)
    try:
        shown = float(text)
    except ValueError:
        return False
    decimals = len(text.split(".", 1)[1]) if "." in text else 0
    return abs(shown - value) <= 0.5 * 10 ** -decimals + 1e-9 * abs(value)


def compare(page, report):
    """Mismatches between the rendered page and the JSON report; the number equal."""
    want = {}
    flatten(report, "", want)
    problems = list(page.duplicates)
    for path, value in want.items():
        if path not in page.metrics:
            problems.append(f"{path}: not on the page (JSON {value!r})")
        elif not same(page.metrics[path], value):
            problems.append(f"{path}: page {page.metrics[path]!r}, JSON {value!r}")
    problems += [f"{path}: on the page ({text!r}), not in the JSON" for path, text in page.metrics.items()
                 if path not in want]
    for i, key in enumerate(report.get("policy", {}).get("refused_keys", [])):
        path = f"policy.refused_keys.{i}.refused"
        if page.attrs.get(path, {}).get("data-key") != normalized(key["key"]):
            problems.append(f"{path}: data-key {page.attrs.get(path, {}).get('data-key')!r}, JSON {key['key']!r}")
    equal = sum(1 for p, v in want.items() if p in page.metrics and same(page.metrics[p], v))
    return problems, equal


def chromium(html_path, extra, workdir, log_path):
    """Runs Chromium on the page with no network; (status, stdout) or (None, why)."""
    cmd = ["unshare", "--net", "--", "chromium", "--headless", "--no-sandbox", "--disable-gpu",
           f"--user-data-dir={workdir}/profile", "--no-first-run", "--no-default-browser-check",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           "--disable-extensions", "--disable-default-apps", "--hide-scrollbars", *extra,
           "file://" + os.path.abspath(html_path)]
    env = dict(os.environ, HOME=f"{workdir}/home")
    with open(log_path, "wb") as log:
        # A session of its own: on timeout, its group is Chromium and its
        # helpers, all started here, and nothing else.
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, env=env, start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            return None, f"chromium {' '.join(extra)} ran past {TIMEOUT_S} s (killed; log {log_path})"
    return proc.returncode, out.decode("utf-8", "replace")


def png_problems(path):
    """Why the screenshot is not a PNG of the window with a page on it; (problems, (w, h))."""
    try:
        data = open(path, "rb").read()
    except OSError as e:
        return [f"no screenshot: {e}"], (0, 0)
    if data[:8] != b"\x89PNG\r\n\x1a\n" or data[12:16] != b"IHDR":
        return [f"{path} is not a PNG"], (0, 0)
    size = struct.unpack(">II", data[16:24])
    problems = []
    if size != WINDOW:
        problems.append(f"screenshot is {size[0]} x {size[1]}, not the window's {WINDOW[0]} x {WINDOW[1]}")
    if len(data) < MIN_PNG_BYTES:
        problems.append(f"screenshot is {len(data)} bytes: blank or nearly")
    return problems, size


def render(html_path, outdir, workdir):
    """Dumps the DOM and takes the screenshot; (dom text, problems)."""
    dom_path = os.path.join(outdir, "replay-report.dom.html")
    status, dom = chromium(html_path, ["--dump-dom"], workdir, os.path.join(outdir, "chromium-dom.log"))
    if status is None or status != 0 or "data-metric" not in dom:
        return None, [dom if status is None else f"chromium --dump-dom: status {status}, no page in its output"
                      f" (log {outdir}/chromium-dom.log)"]
    with open(dom_path, "w") as f:
        f.write(dom)
    shot = os.path.join(outdir, "replay-report.png")
    status, why = chromium(html_path, [f"--screenshot={shot}", f"--window-size={WINDOW[0]},{WINDOW[1]}"],
                           workdir, os.path.join(outdir, "chromium-screenshot.log"))
    problems = [why] if status is None else [] if status == 0 else [f"chromium --screenshot: status {status}"]
    return dom, problems


def check(html_path, json_path, outdir):
    """Returns (passed, one-line summary, problems)."""
    if os.geteuid() != 0:
        return False, "needs root (unshare --net)", []
    if shutil.which("chromium") is None:
        return False, "chromium is not installed (scripts/install-deps.sh test installs it)", []
    try:
        source = open(html_path, encoding="utf-8").read()
        report = json.load(open(json_path, encoding="utf-8", errors="replace"))
    except (OSError, ValueError) as e:
        return False, f"cannot read the inputs: {e}", []
    os.makedirs(outdir, exist_ok=True)
    problems = parse_page(source).references
    with tempfile.TemporaryDirectory(prefix="replay-html-") as workdir:
        dom, render_problems = render(html_path, outdir, workdir)
    problems += render_problems
    if dom is None:
        return False, "the page did not render", problems
    mismatches, equal = compare(parse_page(dom), report)
    png, size = png_problems(os.path.join(outdir, "replay-report.png"))
    problems += mismatches + png
    summary = f"{equal} metrics equal, screenshot {outdir}/replay-report.png ({size[0]} x {size[1]})"
    return not problems, summary, problems


def main(argv):
    if len(argv) != 4:
        print("usage: replay_html_check.py HTML JSON OUTDIR", file=sys.stderr)
        return 2
    passed, summary, problems = check(argv[1], argv[2], argv[3])
    if passed:
        print(f"PASS replay-html: {summary}")
        return 0
    print(f"FAIL replay-html: {summary}; {len(problems)} problem(s):" if problems else f"FAIL replay-html: {summary}")
    for p in problems:
        print(f"  {p}")
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
