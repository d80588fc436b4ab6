"""Schemas from type hints: every supported case, validated with jsonschema-rs."""

import dataclasses
import datetime
import enum
import typing
from typing import Annotated, Any, Literal, NotRequired, Optional

import jsonschema_rs
import pytest
from pydantic import BaseModel, Field
from typing_extensions import TypedDict

from toolwire.tools import ToolContext, ToolDefinitionError, ToolParameterError
from toolwire.tools.schema import FunctionSchema, clean_schema, function_schema


class Address(BaseModel):
    """A postal address."""

    street: str
    city: str = Field(description="City name")
    title: str | None = None  # a property named like a JSON Schema keyword


@dataclasses.dataclass
class Point:
    x: float
    y: float = 0.0


class Options(TypedDict):
    verbose: bool
    depth: NotRequired[int]


class TreeNode(BaseModel):
    value: int
    children: list["TreeNode"] = []


class Colour(enum.Enum):
    RED = "red"
    GREEN = "green"


class Unsupported:
    pass


class Report(BaseModel):
    total: int
    label: str = Field(serialization_alias="name")


def schema_of(fn: Any) -> dict[str, Any]:
    schema = function_schema(fn).parameters
    jsonschema_rs.meta.validate(schema)  # a valid JSON Schema document
    return schema


def is_valid(schema: dict[str, Any], instance: Any) -> bool:
    return bool(jsonschema_rs.validator_for(schema).is_valid(instance))


def no_titles(node: Any, in_properties: bool = False) -> bool:
    if isinstance(node, dict):
        if "title" in node and not in_properties:
            return False
        return all(no_titles(v, k in ("properties", "$defs")) for k, v in node.items())
    if isinstance(node, list):
        return all(no_titles(v) for v in node)
    return True


def test_scalars_are_required_and_typed() -> None:
    def f(s: str, i: int, x: float, b: bool) -> None: ...

    schema = schema_of(f)
    assert schema["type"] == "object"
    assert schema["properties"] == {
        "s": {"type": "string"},
        "i": {"type": "integer"},
        "x": {"type": "number"},
        "b": {"type": "boolean"},
    }
    assert schema["required"] == ["s", "i", "x", "b"]
    assert schema["additionalProperties"] is False
    assert is_valid(schema, {"s": "a", "i": 1, "x": 1.5, "b": True})
    assert not is_valid(schema, {"s": "a", "i": "1", "x": 1.5, "b": True})
    assert not is_valid(schema, {"s": "a", "i": 1, "x": 1.5})


def test_no_parameters_still_has_properties_and_required() -> None:
    def f() -> str:
        return "x"

    assert schema_of(f) == {
        "type": "object",
        "properties": {},
        "required": [],
        "additionalProperties": False,
    }


def test_literal_becomes_enum() -> None:
    def f(unit: Literal["celsius", "fahrenheit"], level: Literal[1, 2, 3] = 1) -> None: ...

    schema = schema_of(f)
    assert schema["properties"]["unit"] == {"type": "string", "enum": ["celsius", "fahrenheit"]}
    assert schema["properties"]["level"]["enum"] == [1, 2, 3]
    assert schema["properties"]["level"]["default"] == 1
    assert not is_valid(schema, {"unit": "kelvin"})
    assert is_valid(schema, {"unit": "celsius"})


def test_enum_class() -> None:
    def f(colour: Colour) -> None: ...

    schema = schema_of(f)
    assert schema["properties"]["colour"]["enum"] == ["red", "green"]
    assert function_schema(f).validate({"colour": "red"}) == {"colour": Colour.RED}


def test_optional_and_defaults() -> None:
    def f(
        a: str,
        b: int = 3,
        c: str | None = None,
        d: Optional[float] = 2.5,  # noqa: UP045 - the typing spelling must work too
        e: int | None = None,
    ) -> None: ...

    schema = schema_of(f)
    assert schema["required"] == ["a"]
    assert schema["properties"]["b"] == {"type": "integer", "default": 3}
    assert schema["properties"]["c"]["default"] is None
    assert {"type": "null"} in schema["properties"]["c"]["anyOf"]
    assert schema["properties"]["d"]["default"] == 2.5
    assert is_valid(schema, {"a": "x", "c": None})
    assert is_valid(schema, {"a": "x", "c": "y", "d": 1})
    assert function_schema(f).validate({"a": "x"}) == {
        "a": "x",
        "b": 3,
        "c": None,
        "d": 2.5,
        "e": None,
    }


def test_optional_without_default_is_required_but_nullable() -> None:
    def f(a: int | None) -> None: ...

    schema = schema_of(f)
    assert schema["required"] == ["a"]
    assert is_valid(schema, {"a": None})


def test_lists_and_dicts() -> None:
    def f(
        tags: list[str],
        scores: dict[str, float],
        matrix: list[list[int]] = [],  # noqa: B006
        anything: dict[str, Any] | None = None,
        pair: tuple[int, str] | None = None,
        untyped: list = [],  # type: ignore[type-arg]  # noqa: B006
    ) -> None: ...

    schema = schema_of(f)
    props = schema["properties"]
    assert props["tags"] == {"type": "array", "items": {"type": "string"}}
    assert props["scores"] == {"type": "object", "additionalProperties": {"type": "number"}}
    assert props["matrix"]["items"] == {"type": "array", "items": {"type": "integer"}}
    assert is_valid(schema, {"tags": ["a"], "scores": {"x": 1.5}, "pair": [1, "a"]})
    assert not is_valid(schema, {"tags": [1], "scores": {}})
    assert not is_valid(schema, {"tags": [], "scores": {"x": "high"}})
    values = function_schema(f).validate({"tags": ["a"], "scores": {"x": 1}, "pair": [1, "a"]})
    assert values["pair"] == (1, "a")
    assert values["scores"] == {"x": 1.0}


def test_nested_model_typeddict_dataclass_are_inlined_and_converted() -> None:
    def f(address: Address, points: list[Point], options: Options | None = None) -> None: ...

    record = function_schema(f)
    schema = schema_of(f)
    assert "$defs" not in schema
    assert "$ref" not in str(schema)
    assert no_titles(schema)
    address = schema["properties"]["address"]
    assert address["type"] == "object"
    assert address["description"] == "A postal address."
    assert address["properties"]["city"]["description"] == "City name"
    assert "title" in address["properties"]  # the field named 'title' survives
    assert address["required"] == ["street", "city"]
    assert schema["properties"]["points"]["items"]["required"] == ["x"]

    args = {
        "address": {"street": "Rua A", "city": "Lisbon", "title": "Home"},
        "points": [{"x": 1, "y": 2}, {"x": 3}],
        "options": {"verbose": True},
    }
    assert is_valid(schema, args)
    assert not is_valid(schema, {"address": {"street": "Rua A"}, "points": []})
    values = record.validate(args)
    assert values["address"] == Address(street="Rua A", city="Lisbon", title="Home")
    assert values["points"] == [Point(x=1.0, y=2.0), Point(x=3.0)]
    assert values["options"] == {"verbose": True}


def test_recursive_model_keeps_its_definition() -> None:
    def f(tree: TreeNode) -> None: ...

    schema = schema_of(f)
    assert set(schema["$defs"]) == {"TreeNode"}
    assert schema["properties"]["tree"] == {"$ref": "#/$defs/TreeNode"}
    assert no_titles(schema)
    nested = {"tree": {"value": 1, "children": [{"value": 2, "children": [{"value": 3}]}]}}
    assert is_valid(schema, nested)
    assert not is_valid(schema, {"tree": {"value": 1, "children": [{"value": "x"}]}})
    tree = function_schema(f).validate(nested)["tree"]
    assert isinstance(tree, TreeNode)
    assert tree.children[0].children[0].value == 3


def test_annotated_field_description_and_constraints() -> None:
    def f(
        count: Annotated[int, Field(description="How many", ge=1, le=10)] = 1,
        name: Annotated[str, Field(min_length=2)] = "ab",
    ) -> None:
        """Do it.

        Args:
            count: Docstring text loses to the Field description.
            name: The name.
        """

    record = function_schema(f)
    props = schema_of(f)["properties"]
    assert props["count"] == {
        "type": "integer",
        "description": "How many",
        "minimum": 1,
        "maximum": 10,
        "default": 1,
    }
    assert props["name"]["description"] == "The name."
    assert props["name"]["minLength"] == 2
    assert record.parameter_descriptions == {"count": "How many", "name": "The name."}
    assert not is_valid(record.parameters, {"count": 11})
    with pytest.raises(ToolParameterError) as exc:
        record.validate({"count": 0})
    assert exc.value.field == "count"
    assert "greater than or equal to 1" in str(exc.value)


def test_field_as_default_value() -> None:
    def f(limit: int = Field(5, description="Max results")) -> None: ...

    record = function_schema(f)
    assert record.parameters["properties"]["limit"] == {
        "type": "integer",
        "description": "Max results",
        "default": 5,
    }
    assert record.validate({}) == {"limit": 5}


def test_dates_and_ids_become_strings_with_formats() -> None:
    def f(day: datetime.date, at: datetime.datetime | None = None) -> None: ...

    schema = schema_of(f)
    assert schema["properties"]["day"] == {"type": "string", "format": "date"}
    values = function_schema(f).validate({"day": "2024-05-01"})
    assert values["day"] == datetime.date(2024, 5, 1)


@pytest.mark.parametrize("annotation", [ToolContext, Optional[ToolContext], ToolContext | None])  # noqa: UP045
def test_tool_context_is_injected_not_shown(annotation: Any) -> None:
    def f(city: str, ctx: annotation) -> None: ...  # type: ignore[valid-type]

    record = function_schema(f)
    assert record.context_param == "ctx"
    assert list(record.parameters["properties"]) == ["city"]
    ctx = ToolContext(principal="alice")
    args, kwargs = record.call_args({"city": "Lisbon"}, ctx)
    assert args == []
    assert kwargs == {"city": "Lisbon", "ctx": ctx}


def test_positional_only_parameters_are_passed_positionally() -> None:
    def f(a: int, /, b: int, *, c: int = 0) -> None: ...

    args, kwargs = function_schema(f).call_args({"a": 1, "b": 2}, None)
    assert args == [1]
    assert kwargs == {"b": 2, "c": 0}


def test_parameter_names_that_clash_with_pydantic() -> None:
    def f(model_config: str, schema: int, json: bool = False, copy: str = "") -> None: ...

    record = function_schema(f)
    assert list(record.parameters["properties"]) == ["model_config", "schema", "json", "copy"]
    assert record.validate({"model_config": "a", "schema": 1}) == {
        "model_config": "a",
        "schema": 1,
        "json": False,
        "copy": "",
    }


def test_string_annotations_are_resolved() -> None:
    def f(address: "Address", count: "int" = 1) -> "Report":
        return Report(total=count, label=address.city)

    record = function_schema(f)
    assert record.parameters["properties"]["count"]["type"] == "integer"
    assert record.result_fields == ("total", "name")


def test_validation_errors_are_written_for_the_model() -> None:
    def f(city: str, unit: Literal["c", "f"] = "c") -> None: ...

    record = function_schema(f)
    with pytest.raises(ToolParameterError) as exc:
        record.validate({"unit": "k", "cty": "Lisbon"})
    message = str(exc.value)
    assert "'city': missing required argument" in message
    assert "'unit': Input should be 'c' or 'f'" in message
    assert "'cty': unknown argument (valid arguments: 'city', 'unit')" in message
    with pytest.raises(ToolParameterError, match="must be a JSON object"):
        record.validate(["Lisbon"])  # type: ignore[arg-type]


def test_result_fields_from_return_annotation() -> None:
    def model() -> Report: ...  # type: ignore[empty-body]
    def typed_dict() -> Options: ...  # type: ignore[empty-body]
    def data() -> Point | None: ...
    def plain() -> dict[str, int]: ...  # type: ignore[empty-body]

    assert function_schema(model).result_fields == ("total", "name")
    assert function_schema(typed_dict).result_fields == ("verbose", "depth")
    assert function_schema(data).result_fields == ("x", "y")
    assert function_schema(plain).result_fields is None


def test_async_detection() -> None:
    async def a() -> None: ...

    class CallableObject:
        async def __call__(self) -> None: ...

    def s() -> None: ...

    assert function_schema(a).is_async
    assert function_schema(CallableObject(), name="obj").is_async
    assert not function_schema(s).is_async


def test_every_problem_is_reported_at_once() -> None:
    def broken(  # type: ignore[no-untyped-def]
        a,
        b: Unsupported,
        *args: int,
        c: dict[int, str],
        d: list[Unsupported] | None = None,
        **kwargs: str,
    ) -> None: ...

    with pytest.raises(ToolDefinitionError) as exc:
        function_schema(broken)
    message = str(exc.value)
    first = message.splitlines()[0]
    assert first.startswith("Cannot make a tool from function ")
    assert first.endswith("test_every_problem_is_reported_at_once.<locals>.broken:")
    assert "parameter 'a' has no type annotation; add one, e.g. `a: str`" in message
    assert "parameter 'b': unsupported type Unsupported; use str, int" in message
    assert "*args is not supported" in message
    assert "**kwargs is not supported" in message
    assert "parameter 'c': dict keys must be str, not int" in message
    assert "parameter 'd': unsupported type Unsupported" in message
    assert len(message.splitlines()) == 7


def test_unsupported_field_inside_a_dataclass_names_the_field() -> None:
    @dataclasses.dataclass
    class Holder:
        thing: Unsupported

    def f(holder: Holder) -> None: ...

    with pytest.raises(
        ToolDefinitionError,
        match=r"parameter 'holder': field .*Holder.thing: unsupported type Unsupported",
    ):
        function_schema(f)


def test_typing_typeddict_on_old_python_gets_a_clear_message() -> None:
    class Old(typing.TypedDict):
        a: int

    def f(o: Old) -> None: ...

    import sys

    if sys.version_info >= (3, 12):
        assert function_schema(f).validate({"o": {"a": 1}}) == {"o": {"a": 1}}
    else:
        with pytest.raises(ToolDefinitionError, match="typing_extensions import TypedDict"):
            function_schema(f)


def test_unresolvable_annotation_names_the_parameter() -> None:
    def f(a: "DoesNotExist", b: int) -> None: ...  # type: ignore[name-defined]  # noqa: F821

    with pytest.raises(
        ToolDefinitionError, match=r"parameter 'a': cannot resolve annotation 'DoesNotExist'"
    ):
        function_schema(f)


def test_non_json_default_is_reported() -> None:
    sentinel = object()

    def f(a: int = sentinel) -> None: ...  # type: ignore[assignment]

    with pytest.raises(
        ToolDefinitionError, match=r"parameter 'a': default .* is not JSON-serialisable"
    ):
        function_schema(f)


def test_context_inside_a_union_is_rejected() -> None:
    def f(a: ToolContext | int) -> None: ...

    with pytest.raises(ToolDefinitionError, match="ToolContext can only be"):
        function_schema(f)


def test_generators_and_lambdas_are_rejected() -> None:
    def gen(n: int) -> typing.Iterator[int]:
        yield n

    with pytest.raises(ToolDefinitionError, match="generator functions are not supported"):
        function_schema(gen)
    with pytest.raises(ToolDefinitionError, match="pass name="):
        function_schema(lambda: 1)
    assert function_schema(lambda: 1, name="one").name == "one"


def test_clean_schema_keeps_data_keywords_untouched() -> None:
    raw = {
        "type": "object",
        "title": "Args",
        "properties": {"title": {"title": "Title", "type": "string", "default": {"title": "x"}}},
        "required": ["title"],
    }
    assert clean_schema(raw) == {
        "type": "object",
        "properties": {"title": {"type": "string", "default": {"title": "x"}}},
        "required": ["title"],
    }


def test_record_is_a_plain_description() -> None:
    async def search(query: str, limit: int = 10) -> list[str]:
        """Search the index.

        Args:
            query: What to look for.
            limit: Maximum number of hits.
        """
        return []

    record = function_schema(search)
    assert isinstance(record, FunctionSchema)
    assert record.name == "search"
    assert record.description == "Search the index."
    assert record.parameter_descriptions == {
        "query": "What to look for.",
        "limit": "Maximum number of hits.",
    }
    assert record.is_async
    assert record.context_param is None
    assert record.result_fields is None
