"""A target for ``python -m streamkit serve`` whose answer names the process that ran it (the
workers test): ``tests.serve._pid_agent:agent``."""

from __future__ import annotations

import os

from streamkit import Agent
from streamkit.testing import FunctionModel, text

agent = Agent(id="pid", model=FunctionModel(lambda request: text(f"pid {os.getpid()}"),
                                            model_id="pid"))
