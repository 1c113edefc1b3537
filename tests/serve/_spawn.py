"""``python -m streamkit serve`` in a real subprocess for the serving tests: start it, read the
line that announces its URL (bounded), stop it (bounded)."""

from __future__ import annotations

import contextlib
import os
import queue
import resource
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator

STOP_TIMEOUT = 10.0
START_TIMEOUT = 60.0  # importing the package on a shared, loaded machine


def _lines(stream: object, out: queue.Queue[str | None]) -> None:
    for line in iter(stream.readline, ""):  # type: ignore[attr-defined]
        out.put(line)
    out.put(None)


def file_limit(count: int) -> Callable[[], None]:
    """A ``preexec_fn`` lowering the child's open-file limit to ``count``."""
    def lower() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (count, count))
    return lower


@contextlib.contextmanager
def serving(*args: str, preexec_fn: Callable[[], None] | None = None) -> Iterator[str]:
    """Run ``python -m streamkit serve --port 0 *args``; yields its URL once the announcement
    line is printed. The process is terminated (then killed) on exit, bounded."""
    errors = tempfile.TemporaryFile()  # a file, not a pipe: a full pipe would block the child
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamkit", "serve", "--port", "0", *args],
        stdout=subprocess.PIPE, stderr=errors, text=True, preexec_fn=preexec_fn,
        env={**os.environ, "PYTHONUNBUFFERED": "1"})
    lines: queue.Queue[str | None] = queue.Queue()
    threading.Thread(target=_lines, args=(proc.stdout, lines), daemon=True).start()
    try:
        try:
            line = lines.get(timeout=START_TIMEOUT)
        except queue.Empty:
            line = None
        if line is None or not line.startswith("streamkit serve: http://"):
            proc.kill()
            proc.wait(STOP_TIMEOUT)
            errors.seek(0)
            raise RuntimeError(f"serve did not announce itself: {line!r}; stderr: "
                               f"{errors.read()[-2000:]!r}")
        yield line.split()[2]
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(STOP_TIMEOUT)
        if proc.stdout is not None:
            proc.stdout.close()
        errors.close()
