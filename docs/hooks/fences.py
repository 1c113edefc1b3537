"""MkDocs hook: ```` ```python no-run ```` fences render as Python code.

The docs mark a block that is compiled but not executed by their tests with ``no-run`` after the
language (``tests/test_readme.py`` states the convention). Python-Markdown's fenced code reads
only a bare language name on the fence line, so such a fence was not recognised at all: the
block, and every heading up to the next fence, rendered as one code block. The word is for the
tests, not the reader: drop it before the page is rendered.
"""

from __future__ import annotations

import re
from typing import Any

NO_RUN_FENCE = re.compile(r"^```python no-run[ \t]*$", re.M)


def on_page_markdown(markdown: str, **_: Any) -> str:
    return NO_RUN_FENCE.sub("```python", markdown)
