"""A report opened in headless Chromium (Debian's `chromium`): its rendered DOM, what the page
said on its console, and a screenshot. Chromium logs every console message, CSP violations
included (a blocked request is one), as `INFO:CONSOLE` lines on stderr with `--enable-logging=stderr`:
the page has no script, so any such line is an error or a request it tried to make."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
TIMEOUT_S = 120


class BrowserMissing(RuntimeError):
    """No Chromium on this machine (`apt-get install chromium`)."""


def find_chromium() -> str | None:
    env = os.environ.get("KERNELWRIGHT_CHROMIUM")
    if env:
        return env if shutil.which(env) else None
    return next((path for name in CANDIDATES if (path := shutil.which(name))), None)


@dataclass
class PageLoad:
    dom: str
    console: list[str]   # every console line the page produced (CSP violations, errors)
    stderr: str


def _run(args: list[str], url: str) -> subprocess.CompletedProcess:
    exe = find_chromium()
    if exe is None:
        raise BrowserMissing("no Chromium found: apt-get install -y chromium (or set KERNELWRIGHT_CHROMIUM)")
    # a profile of its own: nothing of the user's browser is read, and parallel runs do not share one
    with tempfile.TemporaryDirectory(prefix="kw-chromium-") as profile:
        cmd = [exe, "--headless", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
               "--disable-extensions", "--disable-background-networking", "--disable-sync",
               f"--user-data-dir={profile}", *args, url]
        if os.geteuid() == 0:  # Chromium refuses to run as root with its own sandbox
            cmd.insert(1, "--no-sandbox")
        return subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)


def load(html: Path, fragment: str = "") -> PageLoad:
    """The page's DOM after load, and its console lines."""
    url = Path(html).resolve().as_uri() + (f"#{fragment}" if fragment else "")
    proc = _run(["--enable-logging=stderr", "--v=0", "--dump-dom"], url)
    console = [line for line in proc.stderr.splitlines() if ":CONSOLE" in line]
    if proc.returncode != 0 and not proc.stdout:
        raise RuntimeError(f"chromium exited {proc.returncode}: {proc.stderr[-2000:]}")
    return PageLoad(proc.stdout, console, proc.stderr)


def screenshot(html: Path, png: Path, width: int = 1280, height: int = 2400, fragment: str = "") -> Path:
    """A screenshot of the page's top `height` pixels (of the task page `fragment`, when given)."""
    url = Path(html).resolve().as_uri() + (f"#{fragment}" if fragment else "")
    png = Path(png).resolve()
    png.parent.mkdir(parents=True, exist_ok=True)
    proc = _run([f"--screenshot={png}", f"--window-size={width},{height}", "--hide-scrollbars"], url)
    if not png.is_file():
        raise RuntimeError(f"chromium wrote no screenshot (exit {proc.returncode}): {proc.stderr[-2000:]}")
    return png
