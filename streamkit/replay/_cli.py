"""``python -m streamkit replay SOURCE ... --pipeline module:attribute [--ray [ADDRESS]]
[--json OUT] [--output DIR|URI] [--deadline SECONDS]``: the command line of
``streamkit.replay.replay``.

What belongs here: the ``replay`` sub-command's arguments and output (a summary table on
stdout; with ``--json OUT`` one JSON line per stream and a last ``{"summary": ...}`` line; a
progress bar on stderr). What does not: the replay itself (``_execute``).

Sources: files and directories of recorded chunk streams; ``sqlite:PATH`` (a ``SQLiteStore``
file) or a ``postgresql://`` URL (``PostgresStore``, ``--pg-schema``) replay the assistant
messages of the threads named with ``--thread`` or of the resources named with ``--resource``.
The current directory is importable, so ``--pipeline guards:PIPELINE`` finds ``./guards.py``
(on Ray it travels with the job). With ``--ray`` a source may be a URI (``s3://``, ``gs://``)
and ``--output`` names where the Ray workers write the rows (``--output-format parquet``).

``--deadline SECONDS`` bounds each stream (60 by default; ``none`` turns it off). ``SIGTERM``
ends the command as ``SystemExit`` (exit code 143), so its worker processes are terminated on the
way out instead of running on.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from collections.abc import Mapping
from types import FrameType
from typing import IO

from streamkit.errors import StreamkitError
from streamkit.memory import PostgresStore, SQLiteStore
from streamkit.memory._store import MessageStore

from ._deadline import DEFAULT_DEADLINE
from ._execute import replay
from ._sources import MemorySource

__all__ = ["add_parser", "run"]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``replay`` sub-command to ``sub`` (an ``argparse`` sub-parsers object)."""
    p = sub.add_parser("replay", help="run a processor pipeline over recorded streams and "
                                      "report what each processor did")
    p.add_argument("sources", nargs="+", metavar="SOURCE",
                   help="JSON-lines or .sse files of chunks, directories of them, sqlite:PATH "
                        "or postgresql://... (memory threads)")
    p.add_argument("--pipeline", required=True, metavar="MODULE:ATTRIBUTE",
                   help="the pipeline (a processor, a list, a Pipeline, or a factory)")
    p.add_argument("--ray", nargs="?", const="local", default=None, metavar="ADDRESS",
                   help="run as Ray Data tasks: on a local Ray instance, or on the cluster at "
                        "ADDRESS (auto, ray://head:10001)")
    p.add_argument("--json", metavar="OUT", dest="json_out",
                   help="write one JSON line per stream and a summary line to OUT (- = stdout)")
    p.add_argument("--output", metavar="DIR|URI", default=None,
                   help="with --ray: a new or empty directory or URI (s3://, gs://) the Ray "
                        "workers write the rows to")
    p.add_argument("--output-format", choices=("json", "parquet"), default="json",
                   help="the rows of --output: JSON lines (default) or Parquet")
    p.add_argument("--processes", type=int, default=None,
                   help="local worker processes (default: every core; 1: this process)")
    p.add_argument("--batch-size", type=int, default=200, help="streams per task")
    p.add_argument("--resource", action="append", default=[],
                   help="memory sources: replay this resource's threads (repeatable)")
    p.add_argument("--thread", action="append", default=[],
                   help="memory sources: replay this thread (repeatable)")
    p.add_argument("--pg-schema", default="public", help="schema of a postgresql:// source")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    p.add_argument("--deadline", type=_deadline, default=DEFAULT_DEADLINE, metavar="SECONDS",
                   help=f"seconds each stream may take; one past it fails alone and the replay "
                        f"goes on (default {DEFAULT_DEADLINE:g}; 'none': no limit)")


def _deadline(text: str) -> float | None:
    if text.strip().lower() in ("none", "off"):
        return None
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number of seconds > 0 or 'none', got "
                                         f"{text!r}")
    return value


def _exit_on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


def _source(text: str, args: argparse.Namespace) -> object:
    if text.startswith("sqlite:"):
        store: MessageStore = SQLiteStore(text.removeprefix("sqlite:"))
    elif text.startswith(("postgresql://", "postgres://")):
        store = PostgresStore(text, schema=args.pg_schema)
    else:
        return text
    return MemorySource(store, resource_ids=args.resource, thread_ids=args.thread)


def run(args: argparse.Namespace) -> int:
    """Run the parsed ``replay`` command; the process exit code."""
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    # The default action of SIGTERM ends this process at once and leaves its worker processes
    # running; as an exception it unwinds through the executor, which terminates them.
    is_main = threading.current_thread() is threading.main_thread()
    before = signal.signal(signal.SIGTERM, _exit_on_sigterm) if is_main else None
    out: IO[str] | None = None
    try:
        sources = [_source(s, args) for s in args.sources]
        if args.json_out == "-":
            out = sys.stdout
        elif args.json_out:
            out = open(args.json_out, "w", encoding="utf-8")  # noqa: SIM115 - closed below

        def write(row: Mapping[str, object]) -> None:
            if out is not None:
                out.write(json.dumps(row, separators=(",", ":")) + "\n")

        report = replay(sources, args.pipeline, ray=args.ray, processes=args.processes,
                        batch_size=args.batch_size, on_stream=write,
                        progress=not args.no_progress, deadline=args.deadline,
                        output=args.output, output_format=args.output_format)
        if out is not None:
            out.write(json.dumps({"summary": report.to_json()}) + "\n")
    except (StreamkitError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        if out is not None and out is not sys.stdout:
            out.close()
        if is_main:
            signal.signal(signal.SIGTERM, before)
    print(report.summary(), file=sys.stderr if out is sys.stdout else sys.stdout)
    return 1 if report.errors else 0
