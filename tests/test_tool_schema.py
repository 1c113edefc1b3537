"""``@tool`` schemas: per-parameter descriptions from docstrings, structured parameter types.

Every parameter type is checked both ways: the JSON schema the model sees, and the arguments a
model sends converted to the annotated type before the function runs (real agent runs on the
scripted model, so the tool really executes).
"""

# No ``from __future__ import annotations``: tools defined inside tests name local classes,
# which ``get_type_hints`` can only resolve when annotations are evaluated at definition.
import dataclasses
import enum
from typing import Annotated, Any, Literal, TypedDict

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamkit import Agent, ToolError, tool
from streamkit._docstrings import parse_docstring
from streamkit.testing import ScriptedModel, text, tool_call

# --- docstrings ------------------------------------------------------------------------------


def google(customer_id: str, limit: int = 10) -> list[str]:
    """Look up a customer's orders.

    The newest come first.

    Args:
        customer_id (str): the customer's id,
            such as "C-42".
        limit: at most this many orders.

    Returns:
        The order ids.
    """
    return [customer_id] * limit


def numpy(customer_id: str, limit: int = 10) -> list[str]:
    """Look up a customer's orders.

    The newest come first.

    Parameters
    ----------
    customer_id : str
        the customer's id,
        such as "C-42".
    limit : int, optional
        at most this many orders.

    Returns
    -------
    list of str
        The order ids.
    """
    return [customer_id] * limit


def rest(customer_id: str, limit: int = 10) -> list[str]:
    """Look up a customer's orders.

    The newest come first.

    :param str customer_id: the customer's id,
        such as "C-42".
    :param limit: at most this many orders.
    :returns: the order ids.
    """
    return [customer_id] * limit


@pytest.mark.parametrize("fn", [pytest.param(google, id="google"), pytest.param(numpy, id="numpy"),
                                pytest.param(rest, id="rest")])
def test_parameter_descriptions_come_from_each_docstring_style(fn: Any) -> None:
    t = tool(fn)
    props = t.input_schema["properties"]
    assert props["customer_id"]["description"] == 'the customer\'s id, such as "C-42".'
    assert props["limit"]["description"] == "at most this many orders."
    assert props["limit"]["default"] == 10 and props["customer_id"]["type"] == "string"
    # The tool's description is the prose; the parameter list is not repeated in it.
    assert t.description == "Look up a customer's orders.\n\nThe newest come first."


def test_a_description_in_the_type_wins_over_the_docstring() -> None:
    def f(x: Annotated[int, msgspec.Meta(description="from the type")]) -> int:
        """F.

        Args:
            x: from the docstring.
        """
        return x

    assert tool(f).input_schema["properties"]["x"]["description"] == "from the type"


def test_a_docstring_without_sections_is_all_summary_and_undocumented_params_have_none() -> None:
    def f(x: int, y: int) -> int:
        """Add two numbers.

        Mind the overflow.
        """
        return x + y

    t = tool(f)
    assert t.description == "Add two numbers.\n\nMind the overflow."
    assert all("description" not in p for p in t.input_schema["properties"].values())


def test_the_explicit_description_wins_and_no_docstring_falls_back_to_the_name() -> None:
    def f(x: int) -> int:
        return x

    assert tool(f).description == "f"
    assert tool(description="Doubles.")(google).description == "Doubles."
    assert tool(description="Doubles.")(google).input_schema["properties"]["limit"][
        "description"] == "at most this many orders."


def test_sections_after_the_parameters_are_not_descriptions() -> None:
    parsed = parse_docstring("""Do it.

    Args:
        a: first.

    Raises:
        b: not a parameter.

    Example:
        >>> do(a=1)
    """)
    assert parsed.params == {"a": "first."} and parsed.summary == "Do it."


names = st.from_regex(r"[a-z][a-z0-9_]{0,11}", fullmatch=True)
words = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9 ,.'\"-]{0,40}[A-Za-z0-9.]", fullmatch=True)


@given(st.dictionaries(names, words, min_size=1, max_size=6),
       st.sampled_from(["google", "numpy", "rest"]))
def test_any_documented_parameter_reads_back_in_every_style(params: dict[str, str],
                                                            style: str) -> None:
    if style == "google":
        body = "Args:\n" + "".join(f"    {k}: {v}\n" for k, v in params.items())
    elif style == "numpy":
        body = "Parameters\n----------\n" + "".join(f"{k} : object\n    {v}\n"
                                                    for k, v in params.items())
    else:
        body = "".join(f":param {k}: {v}\n" for k, v in params.items())
    parsed = parse_docstring(f"Summary line.\n\n{body}\nReturns:\n    nothing.\n")
    assert parsed.params == {k: v.strip() for k, v in params.items()}
    assert parsed.summary == "Summary line."


# --- structured parameter types --------------------------------------------------------------


class Address(msgspec.Struct):
    street: str
    city: str = "Paris"


@dataclasses.dataclass
class Window:
    start: int
    end: int


class Filter(TypedDict):
    status: Literal["open", "closed"]
    tags: list[str]


class Tier(enum.Enum):
    GOLD = "gold"
    SILVER = "silver"


async def run_tool(t: Any, args: dict[str, Any]) -> Any:
    """Run ``t`` once through an agent with the model calling it with ``args``."""
    agent = Agent(id="a", model=ScriptedModel([tool_call(t.id, args), text("done")]), tools=[t])
    result = await agent.generate("go")
    (outcome,) = result.tool_results
    assert not outcome["is_error"], outcome["result"]
    return outcome["result"]


async def test_struct_dataclass_typeddict_and_enum_parameters_arrive_typed() -> None:
    seen: dict[str, Any] = {}

    @tool
    def ship(address: Address, window: Window, where: Filter, tier: Tier) -> str:
        """Ship an order.

        Args:
            address: where to.
            window: hours of the day.
            where: which orders.
            tier: the customer's tier.
        """
        seen.update(address=address, window=window, where=where, tier=tier)
        return "ok"

    schema = ship.input_schema
    assert schema["required"] == ["address", "window", "where", "tier"]
    assert schema["properties"]["address"] == {"$ref": "#/$defs/Address",
                                               "description": "where to."}
    assert set(schema["$defs"]) == {"Address", "Window", "Filter", "Tier"}
    assert schema["$defs"]["Window"]["required"] == ["start", "end"]
    args = {"address": {"street": "1 Rue"}, "window": {"start": 9, "end": 17},
            "where": {"status": "open", "tags": ["x"]}, "tier": "gold"}
    assert await run_tool(ship, args) == "ok"
    assert seen == {"address": Address("1 Rue"), "window": Window(9, 17),
                    "where": {"status": "open", "tags": ["x"]}, "tier": Tier.GOLD}


@pytest.mark.parametrize("args, wrong", [
    pytest.param({"address": {"city": "Lyon"}}, "address", id="struct-field-missing"),
    pytest.param({"address": {"street": 3}}, "address", id="struct-field-wrong-type"),
])
def test_a_bad_structured_argument_is_a_tool_error_naming_it(args: dict[str, Any],
                                                             wrong: str) -> None:
    @tool
    def ship(address: Address) -> str:
        return address.street

    with pytest.raises(ToolError, match=f"argument '{wrong}'"):
        ship.validate(args)


def test_a_type_with_no_schema_is_a_tool_error_that_lists_what_is_accepted() -> None:
    class Opaque:
        pass

    def f(x: Opaque) -> None:
        return None

    with pytest.raises(ToolError, match="parameter 'x'.*no JSON schema.*pydantic models"):
        tool(f)


def test_a_tool_keeps_the_signature_and_is_callable_directly() -> None:
    @tool
    def add(x: int, y: int = 1) -> int:
        return x + y

    assert add(2) == 3 and add(x=2, y=5) == 7


# --- pydantic (optional) ---------------------------------------------------------------------


@pytest.fixture
def pydantic() -> Any:
    return pytest.importorskip("pydantic", reason="pydantic is optional; install the test extra")


async def test_pydantic_models_are_parameter_types(pydantic: Any) -> None:
    class Item(pydantic.BaseModel):  # type: ignore[name-defined,misc]
        sku: str
        qty: int = pydantic.Field(ge=1, description="how many")

    seen: list[Any] = []

    @tool
    def order(items: list[Item], note: str = "") -> int:
        """Order items.

        Args:
            items: what to order.
            note: for the courier.
        """
        seen.extend(items)
        return len(items)

    schema = order.input_schema
    assert schema["properties"]["items"]["items"] == {"$ref": "#/$defs/Item"}
    assert schema["properties"]["items"]["description"] == "what to order."
    assert schema["$defs"]["Item"]["properties"]["qty"]["minimum"] == 1
    assert await run_tool(order, {"items": [{"sku": "A", "qty": 2}]}) == 1
    assert isinstance(seen[0], Item) and seen[0].qty == 2
    with pytest.raises(ToolError, match="argument 'items'"):
        order.validate({"items": [{"sku": "A", "qty": 0}]})  # pydantic's own constraint


def test_a_pydantic_model_and_a_struct_of_the_same_name_are_refused(pydantic: Any) -> None:
    class Address(pydantic.BaseModel):  # type: ignore[name-defined,misc]  # shadows the Struct
        line: str

    def f(a: list[Address], b: Addr) -> None:  # a list puts the model in $defs
        return None

    with pytest.raises(ToolError, match="both named 'Address'"):
        tool(f)


Addr = Address
