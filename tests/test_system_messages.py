"""``MessageList.add_system`` takes one text the way it takes a list of texts: the run adds its
instructions as a str on every run, through a shorter path (issue 28's fifth pass)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from streamkit.messages import MessageList, get_text

_adds = st.lists(st.tuples(st.sampled_from(["a", "b", "", "a b"]),
                           st.sampled_from([None, "memory", "extra"])), max_size=8)


def _state(ml: MessageList) -> list[tuple[str, str]]:
    return [(m.role, get_text(m)) for m in ml.get_all_system_messages()]


@given(_adds)
def test_one_text_is_added_as_a_list_of_one(adds: list[tuple[str, str | None]]) -> None:
    as_text, as_list = MessageList(), MessageList()
    for text, tag in adds:
        one = as_text.add_system(text, tag=tag)
        listed = as_list.add_system([text], tag=tag)
        assert [get_text(m) for m in one] == [get_text(m) for m in listed]
    assert _state(as_text) == _state(as_list)
    assert list(as_text._tagged) == list(as_list._tagged)
