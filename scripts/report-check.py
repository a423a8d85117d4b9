#!/usr/bin/env python3
"""Open a report.html in headless Chromium as a reader would, and fail when it is broken.

    scripts/report-check.py REPORT.html OUTDIR [--width 1280] [--height 900]

Drives chromium-headless-shell (Debian's package) over the DevTools protocol on a pipe
(--remote-debugging-pipe: no port, no third-party client), loads the page from file://, then:

- fails on any console error or warning, uncaught exception or browser log error;
- fails on any network request other than the file itself (the report must be self-contained);
- fails when a chart is empty: every <svg> must be laid out with a non-zero size and hold marks
  (a path with data, a rect or a circle);
- fails when the page's answer does not begin on the first screen: the decision table where the
  study has one (its verdict and the verdict's first charts then begin within two screens),
  else the verdict (its findings and first charts);
- writes OUTDIR/first-screen.png (the viewport), OUTDIR/full-page.png (the whole page as it
  opens) and OUTDIR/full-page-open.png (every <details> section opened), and
  OUTDIR/check.json (what was measured).

Exit 0 when every check passes, 1 otherwise (each failure printed), 2 on a usage or browser
problem. Standard library only.
"""

import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

BROWSERS = ["chromium-headless-shell", "chromium", "chromium-browser"]
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--remote-debugging-pipe",
]

CHART_CHECK = r"""
(() => {
  const charts = [...document.querySelectorAll('svg')].map((s, i) => {
    const r = s.getBoundingClientRect();
    const marks = [...s.querySelectorAll('path, rect, circle')].filter(e => {
      if (e.tagName === 'path') return (e.getAttribute('d') || '').length > 3;
      if (e.tagName === 'rect') return parseFloat(e.getAttribute('height')) > 0 && parseFloat(e.getAttribute('width')) > 0;
      return true;
    }).length;
    return {index: i, label: s.getAttribute('aria-label') || '', width: r.width, height: r.height, marks};
  });
  const verdict = [...document.querySelectorAll('h2')].find(h => h.textContent.trim() === 'Verdict');
  const decision = [...document.querySelectorAll('h2')].find(h => h.textContent.trim().startsWith('Decision for '));
  const findings = document.querySelector('ul.findings');
  const figs = document.querySelector('.figures');
  const top = e => e ? e.getBoundingClientRect().top + window.scrollY : null;
  const bottom = e => e ? e.getBoundingClientRect().bottom + window.scrollY : null;
  return {
    title: document.title,
    charts,
    verdict_top: top(verdict),
    decision_top: top(decision),
    findings_bottom: bottom(findings),
    first_figures_top: top(figs),
    first_figures_bottom: bottom(figs),
    findings: findings ? [...findings.querySelectorAll('li')].map(li => li.textContent) : [],
    details: document.querySelectorAll('details').length,
    height: document.documentElement.scrollHeight,
  };
})()
"""


class Browser:
    """A headless Chromium spoken to over fds 3 (commands) and 4 (replies and events)."""

    def __init__(self, exe, profile):
        to_r, to_w = os.pipe()
        from_r, from_w = os.pipe()

        def child_fds():
            # The browser reads commands on fd 3 and writes on fd 4. (subprocess closes other
            # fds only after this runs, and pass_fds cannot rename them, hence close_fds off.)
            # Duplicate first: dup2 onto the same number would keep close-on-exec.
            r, w = os.dup(to_r), os.dup(from_w)
            os.dup2(r, 3)
            os.dup2(w, 4)

        self.proc = subprocess.Popen(
            [exe, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
            close_fds=False,
            preexec_fn=child_fds,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        os.close(to_r)
        os.close(from_w)
        self.out = os.fdopen(to_w, "wb", buffering=0)
        self.inp = os.fdopen(from_r, "rb", buffering=0)
        self.buf = b""
        self.next_id = 0
        self.events = []

    def _read(self, deadline):
        while b"\0" not in self.buf:
            if time.time() > deadline:
                raise TimeoutError("the browser did not answer in time")
            chunk = self.inp.read(65536)
            if not chunk:
                err = self.proc.stderr.read().decode(errors="replace")[-2000:]
                raise RuntimeError(f"the browser closed its pipe; stderr:\n{err}")
            self.buf += chunk
        msg, self.buf = self.buf.split(b"\0", 1)
        return json.loads(msg)

    def send(self, method, params=None, session=None, timeout=60):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        self.out.write(json.dumps(msg).encode() + b"\0")
        deadline = time.time() + timeout
        while True:
            reply = self._read(deadline)
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_event(self, method, timeout=60):
        deadline = time.time() + timeout
        for e in self.events:
            if e.get("method") == method:
                return e
        while True:
            e = self._read(deadline)
            self.events.append(e)
            if e.get("method") == method:
                return e

    def close(self):
        try:
            self.send("Browser.close", timeout=10)
        except Exception:  # noqa: BLE001 - closing anyway
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def screenshot(b, session, path, clip=None):
    params = {"format": "png", "captureBeyondViewport": clip is not None}
    if clip:
        params["clip"] = clip
    data = b.send("Page.captureScreenshot", params, session, timeout=120)["data"]
    with open(path, "wb") as f:
        f.write(base64.b64decode(data))


def full_page(b, session, path, width):
    metrics = b.send("Page.getLayoutMetrics", {}, session)
    height = int(metrics["cssContentSize"]["height"]) + 1
    screenshot(b, session, path, {"x": 0, "y": 0, "width": width, "height": height, "scale": 1})
    return height


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("--")]
    opts = dict(zip(argv[1::2], argv[2::2]))
    if len(args) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    report, outdir = os.path.abspath(args[0]), args[1]
    width = int(opts.get("--width", 1280))
    height = int(opts.get("--height", 900))
    if not os.path.isfile(report):
        print(f"error: no report at {report}", file=sys.stderr)
        return 2
    exe = next((shutil.which(b) for b in BROWSERS if shutil.which(b)), None)
    if not exe:
        print("error: no headless Chromium found (apt-get install chromium-headless-shell)",
              file=sys.stderr)
        return 2
    os.makedirs(outdir, exist_ok=True)
    url = "file://" + report
    failures = []
    with tempfile.TemporaryDirectory(prefix="report-check-") as profile:
        b = Browser(exe, profile)
        try:
            target = b.send("Target.createTarget", {"url": "about:blank"})["targetId"]
            session = b.send("Target.attachToTarget", {"targetId": target, "flatten": True})[
                "sessionId"]
            for domain in ("Page", "Runtime", "Log", "Network"):
                b.send(f"{domain}.enable", {}, session)
            b.send("Emulation.setDeviceMetricsOverride",
                   {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
                   session)
            b.send("Page.navigate", {"url": url}, session)
            b.wait_event("Page.loadEventFired")
            measured = b.send("Runtime.evaluate",
                              {"expression": CHART_CHECK, "returnByValue": True},
                              session)["result"]["value"]
            screenshot(b, session, os.path.join(outdir, "first-screen.png"))
            full_page(b, session, os.path.join(outdir, "full-page.png"), width)
            b.send("Runtime.evaluate", {
                "expression": "document.querySelectorAll('details').forEach(d => d.open = true)"},
                session)
            measured["height_open"] = full_page(
                b, session, os.path.join(outdir, "full-page-open.png"), width)
            box = b.send("Runtime.evaluate", {"returnByValue": True, "expression": (
                "(() => { const d = [...document.querySelectorAll('details')]"
                ".find(d => d.querySelector('svg')); if (!d) return null;"
                " const r = d.getBoundingClientRect();"
                " return {x: 0, y: r.top + window.scrollY, width: %d, height: r.height}; })()"
                % width)}, session)["result"].get("value")
            if box:
                box["scale"] = 1
                screenshot(b, session, os.path.join(outdir, "first-cohort.png"), box)
        except (RuntimeError, TimeoutError, KeyError) as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        finally:
            b.close()

    for e in b.events:
        m, p = e.get("method"), e.get("params", {})
        if m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "warning", "assert"):
            text = " ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", []))
            failures.append(f"console {p['type']}: {text}")
        elif m == "Runtime.exceptionThrown":
            failures.append(f"uncaught exception: {p['exceptionDetails'].get('text')}")
        elif m == "Log.entryAdded" and p["entry"].get("level") in ("error", "warning"):
            failures.append(f"browser log {p['entry']['level']}: {p['entry'].get('text')}")
        elif m == "Network.requestWillBeSent":
            req = p["request"]["url"]
            if req != url and not req.startswith("data:"):
                failures.append(f"network request: {req} (the report must be self-contained)")

    charts = measured["charts"]
    if not charts:
        failures.append("the page has no chart")
    for c in charts:
        if c["width"] <= 0 or c["height"] <= 0:
            failures.append(f"chart {c['index']} ({c['label']}) is not laid out")
        if c["marks"] == 0:
            failures.append(f"chart {c['index']} ({c['label']}) is empty: no path, rect or circle")
    # The answer opens the page: the decision table where there is one, else the verdict.
    verdict_limit = height
    if measured["decision_top"] is not None:
        if measured["decision_top"] > height:
            failures.append(f"the decision table starts below the first screen "
                            f"({measured['decision_top']:.0f} px)")
        verdict_limit = 2 * height
    if measured["verdict_top"] is None or not measured["findings"]:
        failures.append("no Verdict section with findings")
    elif measured["verdict_top"] > verdict_limit:
        failures.append(f"the verdict starts below {verdict_limit} px "
                        f"({measured['verdict_top']:.0f} px)")
    if measured["first_figures_top"] is None:
        failures.append("the verdict has no charts")
    elif measured["first_figures_top"] > verdict_limit:
        failures.append(f"the verdict's charts start below {verdict_limit} px "
                        f"({measured['first_figures_top']:.0f} px)")
    measured["failures"] = failures
    with open(os.path.join(outdir, "check.json"), "w") as f:
        json.dump(measured, f, indent=2)

    print(f"{report}: {len(charts)} charts, {measured['details']} folded sections, "
          f"page {measured['height']} px ({measured['height_open']} px opened); verdict at "
          f"{measured['verdict_top']} px, its charts {measured['first_figures_top']}-"
          f"{measured['first_figures_bottom']} px; screenshots in {outdir}")
    for line in measured["findings"]:
        print(f"  - {line}")
    if failures:
        for f in failures:
            print(f"FAIL: {f}", file=sys.stderr)
        return 1
    print("report check: 0 failed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
