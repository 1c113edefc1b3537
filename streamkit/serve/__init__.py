"""Serving agents over HTTP to real clients: ``@mastra/client-js`` and the AI SDK's ``useChat``.

What belongs here: the ASGI app (``create_app``: Mastra's routes under ``/api``, the AI SDK v5
UI message stream at ``/chat/{agent_id}``, a chat page at ``/``) and ``python -m streamkit
serve``. It sits on top of ``streamkit.agent``: nothing below imports it. Needs the ``serve``
extra (``pip install 'streamkit-agents[serve]'``: Starlette and uvicorn).

Modules: ``_app`` (the app, the chat route, the page), ``_mastra`` (Mastra's routes and JSON),
``_ui_stream`` (Mastra chunks → UI chunks), ``_requests`` (request bodies → ``Agent.stream``
arguments, UI messages → messages), ``_sse`` (backpressure, heartbeats, disconnects),
``_limits`` (``Limits``; body size, body deadline, header count, JSON shape), ``_connections``
(header, keep-alive and send deadlines, the connection bound, on uvicorn), ``_cli`` (the
command), ``page.html`` (the page).

Example:
    >>> from streamkit.serve import create_app
    >>> app = create_app([support_agent])      # any ASGI server runs it
    >>> # or from a shell: python -m streamkit serve myapp.agents:support --port 8000
"""

from ._app import create_app
from ._cli import load_target, serve
from ._connections import uvicorn_config
from ._limits import Limits
from ._ui_stream import UIMessageStream

__all__ = ["create_app", "serve", "load_target", "UIMessageStream", "Limits", "uvicorn_config"]
