"""Command line: ``python -m streamkit demo [--model ID] [--base-url URL] [--api-key KEY]
[--question TEXT]``.

``--api-key`` wins over the provider's environment variable (``OPENAI_API_KEY`` for ``openai/``
and ``openai-compatible/``, ``ANTHROPIC_API_KEY`` for ``anthropic/``); a missing key is reported
before any request for api.openai.com and api.anthropic.com, and named in the error of a
keyless request that a server refused.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from ._demo import run_demo
from .errors import StreamkitError
from .models import resolve_model


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
    args = parser.parse_args(argv)
    if (args.api_key or args.base_url) and not args.model:
        parser.error("--api-key and --base-url are for a real model: add --model <router id>")
    try:
        model = None
        if args.model:
            options = {"base_url": args.base_url} if args.base_url else {}
            if args.api_key:
                options["api_key"] = args.api_key
            model = resolve_model(args.model, **options)
        result = asyncio.run(run_demo(model, question=args.question))
    except StreamkitError as exc:
        print(f"\nerror: {exc}", file=sys.stderr)
        return 1
    return 0 if result.error is None else 1


if __name__ == "__main__":
    sys.exit(main())
