"""Command line: ``python -m streamkit demo [--model ID] [--base-url URL] [--api-key KEY]
[--question TEXT]``, ``python -m streamkit serve [TARGET ...] [--demo] [--host H] [--port P]``
(the ``serve`` extra), ``python -m streamkit replay SOURCE ... --pipeline module:attribute
[--ray [ADDR]] [--json OUT]`` (``streamkit.replay._cli``).

``--api-key`` wins over the provider's environment variable (``OPENAI_API_KEY`` for ``openai/``
and ``openai-compatible/``, ``ANTHROPIC_API_KEY`` for ``anthropic/``); a missing key is reported
before any request for api.openai.com and api.anthropic.com, and named in the error of a
keyless request that a server refused.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from ._demo import pace_ms, run_demo
from .errors import StreamkitError
from .models import resolve_model
from .replay import _cli as replay_cli

_PACE_HELP = ("the demo model's milliseconds before each chunk (default: $STREAMKIT_DEMO_PACE_MS, "
              "else 30; 0: as fast as it can)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m streamkit",
                                     description="streamkit: Mastra's Processor pipeline.")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run the support-agent demo (scripted model by default)")
    demo.add_argument("--model", help="router id, e.g. openai/gpt-4o-mini or "
                                      "openai-compatible/<model> (default: built-in scripted)")
    demo.add_argument("--base-url", help="base URL for openai-compatible models")
    demo.add_argument("--api-key", help="the provider's API key (default: OPENAI_API_KEY or "
                                        "ANTHROPIC_API_KEY from the environment)")
    demo.add_argument("--question", default="Where is my order? I'm customer C-42.")
    demo.add_argument("--pace-ms", type=float, metavar="MS", help=_PACE_HELP)
    serve = sub.add_parser("serve", help="serve agents over HTTP to Mastra and AI SDK clients")
    serve.add_argument("targets", nargs="*", metavar="TARGET",
                       help="module:attribute naming an Agent, or a list or dict of agents")
    serve.add_argument("--demo", action="store_true", help="serve the demo agent (id support)")
    serve.add_argument("--pace-ms", type=float, metavar="MS", help=_PACE_HELP)
    serve.add_argument("--no-studio", action="store_true",
                       help="leave out the studio's routes: they show what the output "
                            "processors removed (docs/studio.md)")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000, help="0 picks a free port")
    serve.add_argument("--memory", default="streamkit-demo.sqlite3", metavar="PATH",
                       help="the demo agent's SQLite memory (default: %(default)s)")
    serve.add_argument("--workers", type=int, default=1, metavar="N",
                       help="processes serving the port (default 1); their memory must be "
                            "shared: PostgreSQL, Redis or a SQLite file")
    serve.add_argument("--heartbeat", type=float, default=15.0, metavar="SECONDS",
                       help="seconds of silence before a stream sends a heartbeat comment")
    serve.add_argument("--resource-header", metavar="NAME",
                       help="take each request's resource (whose threads it may use) from this "
                            "header, as set by your authenticating proxy")
    for flag, kind, what in _LIMIT_FLAGS:  # default: streamkit.serve.Limits()
        serve.add_argument(flag, type=kind, metavar="N" if kind is int else "SECONDS",
                           help=what)
    replay_cli.add_parser(sub)
    args = parser.parse_args(argv)
    if args.command == "replay":
        return replay_cli.run(args)
    if args.command == "serve":
        return _serve(args)
    if (args.api_key or args.base_url) and not args.model:
        parser.error("--api-key and --base-url are for a real model: add --model <router id>")
    try:
        model = None
        if args.model:
            options = {"base_url": args.base_url} if args.base_url else {}
            if args.api_key:
                options["api_key"] = args.api_key
            model = resolve_model(args.model, **options)
        result = asyncio.run(run_demo(model, question=args.question,
                                      pace=pace_ms(args.pace_ms)))
    except StreamkitError as exc:
        print(f"\nerror: {cli_message(exc)}", file=sys.stderr)
        return 1
    return 0 if result.error is None else 1


#: Keyword arguments the library's errors tell a caller to pass, and the flag that passes each
#: on this command line.
_FLAGS = {"api_key=": "--api-key KEY", "base_url=": "--base-url URL"}


def cli_message(exc: BaseException) -> str:
    """The error's message with the Python arguments it names (``pass api_key=``) replaced by
    the command-line flags that pass them (``pass --api-key KEY``)."""
    message = str(exc)
    for argument, flag in _FLAGS.items():
        message = message.replace(f"pass {argument}", f"pass {flag}")
    return message


#: ``serve`` options overriding one ``streamkit.serve.Limits`` field each (docs/serving.md).
_LIMIT_FLAGS: list[tuple[str, type, str]] = [
    ("--max-body-bytes", int, "largest request body (default 4 MiB; above: 413)"),
    ("--max-json-depth", int, "deepest JSON nesting in a body (default 100; above: 400)"),
    ("--max-headers", int, "most request headers (default 100; above: 431)"),
    ("--max-header-bytes", int, "largest request line plus headers (default 16 KiB)"),
    ("--header-timeout", float, "seconds to receive a request's headers (default 10)"),
    ("--body-timeout", float, "seconds to receive a request's body (default 30; then 408)"),
    ("--keep-alive-timeout", float, "seconds an idle keep-alive connection is kept "
                                    "(default 5)"),
    ("--send-timeout", float, "seconds a client may stop reading before it is dropped and "
                              "its run cancelled (default 30)"),
    ("--max-connections", int, "most open connections (default: from the open-file limit, "
                               "640 under 1,024)"),
]


def _serve(args: argparse.Namespace) -> int:
    try:
        from .serve import Limits, serve
    except ImportError as exc:
        print(f"error: serving needs the serve extra "
              f"(pip install 'streamkit-agents[serve]'): {exc}", file=sys.stderr)
        return 2
    try:
        given = {flag[2:].replace("-", "_"): getattr(args, flag[2:].replace("-", "_"))
                 for flag, _, _ in _LIMIT_FLAGS}
        limits = Limits(**{name: value for name, value in given.items() if value is not None})
        return serve(args.targets, demo=args.demo, host=args.host, port=args.port,
                     memory_path=args.memory, heartbeat=args.heartbeat,
                     resource_header=args.resource_header, limits=limits,
                     workers=args.workers, pace_ms=args.pace_ms,
                     studio=not args.no_studio)
    except StreamkitError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
