"""A target for ``python -m streamkit serve`` whose answer tells how the serving process's
cyclic collector is set (the collector test): ``tests.serve._gc_agent:agent``."""

from __future__ import annotations

import gc

from streamkit import Agent
from streamkit.testing import FunctionModel, text

agent = Agent(id="gc", model=FunctionModel(
    lambda request: text(f"threshold {gc.get_threshold()[0]} frozen {gc.get_freeze_count()}"),
    model_id="gc"))
