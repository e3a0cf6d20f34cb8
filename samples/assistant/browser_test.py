#!/usr/bin/env python3
"""The assistant in a real browser: headless Chromium driven by Selenium (Debian's chromium,
chromium-driver and python3-selenium).

    browser_test.py ASSISTANT_BINARY
        Starts the assistant on a free port with a temporary data dir, uploads a 2-page PDF and a
        DOCX made here through the page, sees both listed, asks a question answered on page 2 of
        the PDF, and checks that the answer streamed in and that a citation points at page 2.
        Exit 0 passed, 1 failed, 77 skipped (no browser; a failure under CBL_REQUIRE_MODEL=1).

    browser_test.py ASSISTANT_BINARY --screenshot OUT.png --model M --question Q FILE...
        Uploads FILEs, asks Q with model M and saves a screenshot of the answer (README).
"""
import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zipfile

SKIP = 77


def need_browser():
    """Returns (webdriver module, chromium, chromedriver) or exits: a skip, or a failure when
    CBL_REQUIRE_MODEL=1 (the test command's setting) since then the test must run."""
    missing = []
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver") or (os.path.exists("/usr/bin/chromedriver") and "/usr/bin/chromedriver")
    if not chromium:
        missing.append("chromium")
    if not driver:
        missing.append("chromium-driver")
    try:
        from selenium import webdriver  # noqa: F401
    except ImportError:
        missing.append("python3-selenium")
        webdriver = None
    if missing:
        msg = "browser test: missing " + ", ".join(missing) + " (bash scripts/install-deps.sh installs them)"
        if os.environ.get("CBL_REQUIRE_MODEL") == "1":
            print(msg + ": failing because CBL_REQUIRE_MODEL=1", file=sys.stderr)
            sys.exit(1)
        print(msg + ": skipped", file=sys.stderr)
        sys.exit(SKIP)
    return webdriver, chromium, driver


def pdf_two_pages(page1, page2):
    """A minimal valid PDF, one line of Helvetica text per page (as tests/util/doc-writers.cpp)."""
    objs = ["<< /Type /Catalog /Pages 2 0 R >>",
            "<< /Type /Pages /Kids [4 0 R 6 0 R] /Count 2 >>",
            "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    for i, text in enumerate([page1, page2]):
        content = "BT /F1 12 Tf 72 720 Td (%s) Tj ET\n" % text
        objs.append("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
                    "/Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>" % (5 + 2 * i))
        objs.append("<< /Length %d >>\nstream\n%sendstream" % (len(content), content))
    out = "%PDF-1.4\n"
    offsets = []
    for i, o in enumerate(objs):
        offsets.append(len(out))
        out += "%d 0 obj\n%s\nendobj\n" % (i + 1, o)
    xref = len(out)
    out += "xref\n0 %d\n0000000000 65535 f \n" % (len(objs) + 1)
    out += "".join("%010d 00000 n \n" % off for off in offsets)
    out += "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objs) + 1, xref)
    return out.encode("latin-1")


def write_docx(path, heading, paragraph):
    """A minimal DOCX: the content types and word/document.xml with a heading and a paragraph."""
    w = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
    doc = ('<?xml version="1.0" encoding="UTF-8"?><w:document xmlns:w="%s"><w:body>'
           '<w:p><w:pPr><w:pStyle w:val="Heading1"/></w:pPr><w:r><w:t>%s</w:t></w:r></w:p>'
           '<w:p><w:r><w:t>%s</w:t></w:r></w:p></w:body></w:document>') % (w, heading, paragraph)
    types = ('<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/'
             'package/2006/content-types"><Default Extension="xml" ContentType="application/xml"/>'
             '<Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-'
             'officedocument.wordprocessingml.document.main+xml"/></Types>')
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("[Content_Types].xml", types)
        z.writestr("word/document.xml", doc)


class Assistant:
    """The server under test, on a free port (--listen 127.0.0.1:0; the port is read from its
    first line)."""

    def __init__(self, binary, data, extra=()):
        self.proc = subprocess.Popen([binary, "--listen", "127.0.0.1:0", "--data", data, "--threads", "2"] + list(extra),
                                     stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        m = re.search(r"http://(127\.0\.0\.1:\d+)/", line)
        if not m:
            self.proc.kill()
            raise SystemExit("assistant did not start: %r (exit %s)" % (line, self.proc.wait()))
        self.url = "http://%s/" % m.group(1)

    def stop(self):
        """SIGTERM, as an operator would: the server must shut down cleanly (exit 0)."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return "hung"


def new_driver(webdriver, chromium, chromedriver, width=1280, height=900):
    from selenium.webdriver.chrome.service import Service
    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--window-size=%d,%d" % (width, height)):
        opts.add_argument(a)
    return webdriver.Chrome(service=Service(chromedriver), options=opts)


def wait_for(driver, what, fn, timeout=120):
    from selenium.webdriver.support.ui import WebDriverWait
    try:
        return WebDriverWait(driver, timeout, poll_frequency=0.1).until(lambda d: fn(d))
    except Exception:
        err = driver.find_element("id", "error").text
        raise AssertionError("timed out waiting for %s (page error: %r)" % (what, err))


def upload(driver, files, collection="", timeout=120):
    driver.find_element("id", "files").send_keys("\n".join(files))
    if collection:
        driver.find_element("id", "upload-collection").send_keys(collection)
    driver.find_element("id", "upload-btn").click()
    names = [os.path.basename(f) for f in files]
    return wait_for(driver, "the documents listed", lambda d: all(
        any(e.text == n for e in d.find_elements("css selector", "#docs .doc .name")) for n in names) and names, timeout)


def ask(driver, question, compare=True, k=None, timeout=120):
    """Asks and waits for the answer to end; returns in how many separate tasks the answer's
    text changed. A MutationObserver's callback runs once per task however many tokens that task
    appended, so a response that arrived in one piece counts 1, a streamed one more."""
    driver.execute_script("""
        window.__changes = 0;
        new MutationObserver(() => { window.__changes++; })
          .observe(document.getElementById('answer'), {childList: true, characterData: true, subtree: true});""")
    box = driver.find_element("id", "compare")
    if box.is_selected() != compare:
        box.click()
    if k:
        field = driver.find_element("id", "k")
        field.clear()
        field.send_keys(str(k))
    q = driver.find_element("id", "question")
    q.clear()
    q.send_keys(question)
    driver.find_element("id", "ask-btn").click()
    wait_for(driver, "the answer to end", lambda d: d.find_elements("css selector", "#citations .citation")
             and "streaming" not in d.find_element("id", "answer").get_attribute("class"), timeout)
    return driver.execute_script("return window.__changes")


def run_test(binary):
    webdriver, chromium, chromedriver = need_browser()
    with tempfile.TemporaryDirectory() as tmp:
        pdf = os.path.join(tmp, "almanac.pdf")
        with open(pdf, "wb") as f:
            f.write(pdf_two_pages("Spring brings rain to the valley of Castelmoro.",
                                  "Autumn brings the walnut harvest to Castelmoro in October."))
        docx = os.path.join(tmp, "beekeeping.docx")
        write_docx(docx, "Bees", "Honeybees dance to show their sisters where the clover grows.")
        server = Assistant(binary, os.path.join(tmp, "data"), ["--no-embedder"])
        driver = None
        try:
            driver = new_driver(webdriver, chromium, chromedriver)
            driver.get(server.url)
            wait_for(driver, "the page", lambda d: "libcacheblend" in d.find_element("id", "version").text, 30)
            upload(driver, [pdf, docx], collection="farm")
            kinds = [e.text for e in driver.find_elements("css selector", "#docs .doc .meta")]
            assert len(kinds) == 2 and all("in farm" in k for k in kinds), kinds

            changes = ask(driver, "When is the walnut harvest in Castelmoro?")
            answer = driver.find_element("id", "answer").text
            assert answer.strip(), "no answer text"
            assert changes >= 2, "the answer arrived in %d change(s): not streamed" % changes
            cites = driver.find_elements("css selector", "#citations .citation")
            first = cites[0]
            assert first.get_attribute("data-page") == "2" and first.get_attribute("data-uri").endswith("almanac.pdf"), \
                [(c.get_attribute("data-uri"), c.get_attribute("data-page")) for c in cites]
            assert "page 2" in first.text, first.text
            first.find_element("css selector", ".cite-head").click()
            passage = first.find_element("css selector", ".passage")
            wait_for(driver, "the passage", lambda d: passage.is_displayed(), 5)
            assert "walnut harvest" in passage.text, passage.text
            stats = driver.find_element("id", "stats").text
            assert "TTFT" in stats and "vs full prefill" in stats, stats
            print("browser test: passed (answer %r, %d changes while streaming, %s)" % (answer[:60], changes, stats))
        finally:
            if driver:
                driver.quit()
            rc = server.stop()
        assert rc == 0, "assistant exit status after SIGTERM: %s" % rc


def run_screenshot(binary, out, model, question, files):
    webdriver, chromium, chromedriver = need_browser()
    with tempfile.TemporaryDirectory() as tmp:
        server = Assistant(binary, os.path.join(tmp, "data"), ["--model", model, "--threads", "2"])
        driver = None
        try:
            driver = new_driver(webdriver, chromium, chromedriver, 1280, 860)
            driver.get(server.url)
            wait_for(driver, "the page", lambda d: "libcacheblend" in d.find_element("id", "version").text, 60)
            upload(driver, files, collection="licenses", timeout=600)
            # The first answer computes and stores the chunks' KV; the second reuses it, so the
            # blend vs full comparison shows. A 1.5B model on a few cores: minutes, not seconds.
            ask(driver, question, k=3, timeout=1200)
            ask(driver, question, k=3, timeout=1200)
            driver.find_element("css selector", "#citations .citation .cite-head").click()
            time.sleep(0.5)
            driver.save_screenshot(out)
            print("screenshot: %s" % out)
        finally:
            if driver:
                driver.quit()
            server.stop()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("binary")
    p.add_argument("--screenshot")
    p.add_argument("--model", default="qwen2.5-coder-1.5b")
    p.add_argument("--question", default="")
    p.add_argument("files", nargs="*")
    a = p.parse_intermixed_args()
    if a.screenshot:
        run_screenshot(a.binary, a.screenshot, a.model, a.question, a.files)
    else:
        try:
            run_test(a.binary)
        except AssertionError as e:
            print("browser test: FAILED: %s" % e, file=sys.stderr)
            sys.exit(1)


if __name__ == "__main__":
    main()
