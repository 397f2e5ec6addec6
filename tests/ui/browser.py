"""The inspector served as a user starts it (``memoryctl ui``, which runs a worker over the
demo's broker, over a store formed by ``make demo``), and headless Debian Chromium driven by Selenium, for tests/ui/test_browser.py.

Chromium and its driver come from Debian's packages (``make test`` installs them as root);
axe-core from the npm registry (``make test`` puts it in .runtime/npm when npm is there).
Screenshots go to .runtime/screenshots/.
"""

from __future__ import annotations

import os
import queue
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / ".runtime" / "screenshots"
AXE = ROOT / ".runtime" / "npm" / "node_modules" / "axe-core" / "axe.min.js"
CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--window-size=1280,900")


def missing() -> str | None:
    """Why the browser tests cannot run here, or None."""
    for path in (CHROMIUM, CHROMEDRIVER):
        if not os.access(path, os.X_OK):
            return f"{path} is missing (as root: apt-get install chromium chromium-driver; make test does it)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is missing (pip install -e '.[test]')"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def printed_command(line: str, port: int) -> tuple[dict[str, str], list[str]]:
    """The variables and argv of the command ``make demo`` prints last, on ``port``, run by
    this interpreter's ``memoryctl``."""
    words = shlex.split(line)
    env = {}
    while words and "=" in words[0] and not words[0].startswith("-"):
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    assert words and words[0].endswith("memoryctl"), f"not a memoryctl command: {line!r}"
    words[0] = str(Path(sys.executable).with_name("memoryctl"))
    words[words.index("--port") + 1] = str(port)
    return env, words


class Served:
    """A command (``memoryctl ui ...``) in its own process; ``link`` is the one-time sign-in link it printed."""

    def __init__(self, env: dict[str, str], argv: list[str], port: int) -> None:
        self.port = port
        self.log = tempfile.NamedTemporaryFile("w+", suffix=".log", delete=False)
        self.proc = subprocess.Popen(argv, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=self.log, text=True)
        lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=lambda: [lines.put(line) for line in self.proc.stdout], daemon=True).start()
        try:
            first = lines.get(timeout=60)
        except queue.Empty:
            self.stop()
            raise RuntimeError(f"memoryctl ui printed no link: {Path(self.log.name).read_text()}") from None
        self.link = first.strip().rsplit(" ", 1)[-1]
        self.base = f"http://127.0.0.1:{port}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def chrome():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    profile = tempfile.mkdtemp(prefix="ui-chromium-")
    for flag in (*FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.implicitly_wait(0)
    driver.profile_dir = profile
    return driver


def close(driver) -> None:
    driver.quit()
    shutil.rmtree(driver.profile_dir, ignore_errors=True)


def axe_violations(driver) -> list[dict] | None:
    """axe-core's violations (serious and critical) on the current page; None without axe-core."""
    if not AXE.is_file():
        return None
    driver.execute_script(AXE.read_text(encoding="utf-8"))
    result = driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "axe.run(document, {resultTypes: ['violations']}).then(r => done(r.violations)).catch(e => done([{id: 'axe-error', impact: 'critical', help: String(e), nodes: []}]));")
    return [v for v in result if v.get("impact") in ("serious", "critical")]


def shot(driver, name: str) -> Path:
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / f"{name}.png"
    driver.save_screenshot(str(path))
    return path


def wait_until(predicate, timeout: float = 30.0, every: float = 0.2):
    """``predicate()`` once it is true, or its last value at ``timeout``. An element that htmx
    swapped out between finding it and reading it (stale) or that is not there yet counts as
    not yet: the page is still changing."""
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException

    deadline = time.monotonic() + timeout
    while True:
        try:
            value = predicate()
        except (StaleElementReferenceException, NoSuchElementException):
            value = None
        if value or time.monotonic() > deadline:
            return value
        time.sleep(every)
