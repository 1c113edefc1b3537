"""Messages in and out of a ``MessageList`` (issue 32): what ``add`` takes and what ``ui()`` gives
are typed. ``tests/test_user_typing.py`` expects each line marked ``# E: <code>`` to be reported by
``mypy --strict`` with that code, and the unmarked lines to be clean.
"""

from __future__ import annotations

from streamkit.messages import Message, MessageList, to_ui

ml = MessageList("hi")
ml.add([{"role": "assistant", "content": "hello"}, Message.user("again")], "response")
ml.add_system("Be brief.")
ui = ml.get.all.ui()
created: str = ui[0]["createdAt"]
first: str = to_ui([Message.user("x")])[0]["content"]

ml.add(42)  # E: arg-type
ml.add_system(None)  # E: arg-type
count: int = ui[0]["createdAt"]  # E: assignment
print(ui[0]["created_at"])  # E: typeddict-item
