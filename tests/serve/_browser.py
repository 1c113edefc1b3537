"""Debian's chromium for the page's browser tests (playwright drives it; playwright's own browser
download is never used): installed with ``apt-get`` where ``/usr/bin/chromium`` is missing, else
the test is skipped with the printed reason. Screenshots go to ``$STREAMKIT_ARTIFACTS`` or
``tests/artifacts/`` (git-ignored)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]
#: Every wait for the page is bounded by this (a loaded, shared machine; nothing is timed).
WAIT_MS = 30_000


def _install_chromium() -> str | None:
    """Install Debian's chromium; ``None`` when done, else why it could not be."""
    apt = shutil.which("apt-get")
    if apt is None:
        return "no apt-get to install Debian's chromium with"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for args in ([apt, "update", "-q"], [apt, "install", "-y", "-q", "chromium"]):
        proc = subprocess.run(args, capture_output=True, text=True, timeout=900, env=env)
        if proc.returncode != 0:
            return f"{' '.join(args[1:])} failed: {proc.stderr.strip()[-300:]}"
    return None


def chromium_path() -> Path:
    """``/usr/bin/chromium``, installed if missing; skips the test (reason printed) if it
    cannot be."""
    if not CHROMIUM.exists():
        why = _install_chromium()
        if why is not None or not CHROMIUM.exists():
            reason = f"Debian's chromium is not installed and could not be: {why}"
            print(f"SKIP: {reason}")
            pytest.skip(reason)
    return CHROMIUM


def artifacts_dir() -> Path:
    """Where screenshots go: ``$STREAMKIT_ARTIFACTS``, else ``tests/artifacts``."""
    path = Path(os.environ.get("STREAMKIT_ARTIFACTS")
                or Path(__file__).resolve().parents[1] / "artifacts")
    path.mkdir(parents=True, exist_ok=True)
    return path
