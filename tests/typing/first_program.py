"""A first program against an installed streamkit: an agent with a guard, on a scripted model.

``tests/test_install.py`` copies it outside the repository, runs it against the wheels installed
in a fresh venv (and against an editable install) and checks it with ``mypy --strict`` there. It
needs only the two distributions, ``streamkit-agents`` and ``streamkit-operators``.
"""

from __future__ import annotations

import asyncio

from streamkit import Abort, Agent, Chunk, Processor
from streamkit.chunks import TextDelta
from streamkit.testing import ScriptedModel, text
from streamkit_operators import PIIDetector


class NoSecrets(Processor):
    """Rejects an answer that shows an API key and asks the model again."""

    id = "no-secrets"

    def process_output_stream(self, part: Chunk, abort: Abort) -> Chunk | None:
        if isinstance(part, TextDelta) and "sk-" in part.payload.text:
            abort("do not print API keys", retry=True)
        return part


async def main() -> list[str]:
    agent = Agent(id="support", max_processor_retries=1,
                  model=ScriptedModel([text("Your key is sk-live-123."),
                                       text("Write to ada@example.com for a new key.")]),
                  output_processors=[NoSecrets(),
                                     PIIDetector(detection_types=["email"], phase="output")])
    result = await agent.generate("What is my API key?")
    retried = [step.tripwire.reason for step in result.steps if step.tripwire is not None]
    return [result.text, f"retried: {retried}", f"tripwire: {result.tripwire}"]


if __name__ == "__main__":
    for line in asyncio.run(main()):
        print(line)
