"""The provider ("core") form of a user message (``to_core``), held to its rule written plainly:
text only is one string (the text parts joined, else the legacy ``content`` string), nothing at
all is no message, anything else is the list of parts."""

from __future__ import annotations

from typing import Any

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from streamkit.messages import FilePart, ImagePart, Message, MessageContent, TextPart, to_core

_USER_PARTS = st.lists(st.one_of(
    st.builds(TextPart, st.sampled_from(["", "a", "hi ", "ü"])),
    st.builds(FilePart, mime_type=st.just("text/plain"), data=st.just("ZGF0YQ==")),
    st.builds(ImagePart, image=st.just("https://x/i.png"),
              mime_type=st.sampled_from([msgspec.UNSET, "image/png"]))), max_size=5)


@given(parts=_USER_PARTS, mirror=st.sampled_from([msgspec.UNSET, None, "", "typed"]))
def test_a_user_messages_core_form_follows_the_rule(parts: list[Any],
                                                     mirror: Any) -> None:
    # The rule, written plainly: text only -> one string (the text parts joined, else the
    # legacy ``content`` string), nothing at all -> no message; else the list of parts.
    message = Message(role="user", content=MessageContent(parts=list(parts), content=mirror))
    sent: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, TextPart):
            sent.append({"type": "text", "text": part.text})
        elif isinstance(part, FilePart):
            sent.append({"type": "file", "data": part.data, "mimeType": part.mime_type})
        else:
            image = {"type": "image", "image": part.image}
            if part.mime_type is not msgspec.UNSET:
                image["mimeType"] = part.mime_type
            sent.append(image)
    if all(p["type"] == "text" for p in sent):
        text = "".join(p["text"] for p in sent) or (mirror if isinstance(mirror, str) else "")
        expected = [{"role": "user", "content": text}] if text or sent else []
    else:
        expected = [{"role": "user", "content": sent}]
    assert to_core([message]) == expected
