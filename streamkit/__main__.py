"""Command line: ``python -m streamkit demo [--model ID] [--base-url URL] [--question TEXT]``,
``python -m streamkit replay SOURCE ... --pipeline module:attribute [--ray [ADDR]] [--json OUT]``
(``streamkit.replay._cli``)."""

from __future__ import annotations

import argparse
import asyncio
import sys

from ._demo import run_demo
from .errors import StreamkitError
from .models import resolve_model
from .replay import _cli as replay_cli


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m streamkit",
                                     description="streamkit: Mastra's Processor pipeline.")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run the support-agent demo (scripted model by default)")
    demo.add_argument("--model", help="router id, e.g. openai/gpt-4o-mini or "
                                      "openai-compatible/<model> (default: built-in scripted)")
    demo.add_argument("--base-url", help="base URL for openai-compatible models")
    demo.add_argument("--question", default="Where is my order? I'm customer C-42.")
    replay_cli.add_parser(sub)
    args = parser.parse_args(argv)
    if args.command == "replay":
        return replay_cli.run(args)
    try:
        model = None
        if args.model:
            options = {"base_url": args.base_url} if args.base_url else {}
            model = resolve_model(args.model, **options)
        result = asyncio.run(run_demo(model, question=args.question))
    except StreamkitError as exc:
        print(f"\nerror: {exc}", file=sys.stderr)
        return 1
    return 0 if result.error is None else 1


if __name__ == "__main__":
    sys.exit(main())
