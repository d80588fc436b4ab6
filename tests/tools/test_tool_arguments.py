"""`ToolArguments`: a call's raw JSON text that also answers the reads of a dict."""

from __future__ import annotations

import copy
import json
import pickle
from typing import Any

import orjson
import pytest

from toolwire.tools import ToolArguments, ToolParameterError

TEXT = '{"city": "Paris", "units": "metric", "days": [1, 2]}'


def test_it_is_the_text() -> None:
    args = ToolArguments(TEXT, "get_weather")
    assert isinstance(args, str)
    assert args == TEXT
    assert hash(args) == hash(TEXT)
    assert str(args) == TEXT
    assert type(str(args)) is str
    assert repr(args) == repr(TEXT)
    # Text reads stay the text's.
    assert (len(args), args[0], args[:8], "Paris" in args) == (len(TEXT), "{", '{"city":', True)
    assert list(args)[:2] == ["{", '"']


def test_encoders_see_a_json_string() -> None:
    args = ToolArguments(TEXT)
    assert json.loads(json.dumps({"arguments": args})) == {"arguments": TEXT}
    assert orjson.loads(orjson.dumps({"arguments": args})) == {"arguments": TEXT}


def test_the_reads_a_str_lacks_read_the_parsed_object() -> None:
    args = ToolArguments(TEXT)
    assert args.get("city") == "Paris"
    assert args.get("missing") is None
    assert args.get("missing", 5) == 5
    assert args["days"] == [1, 2]
    assert list(args.keys()) == ["city", "units", "days"]
    assert next(iter(args.values())) == "Paris"
    assert dict(args.items()) == json.loads(TEXT)
    assert dict(args) == json.loads(TEXT)

    def takes(**kwargs: Any) -> dict[str, Any]:
        return kwargs

    assert takes(**args) == json.loads(TEXT)
    with pytest.raises(KeyError):
        args["missing"]


def test_equal_to_a_mapping_of_the_same_object() -> None:
    args = ToolArguments(TEXT)
    assert args == json.loads(TEXT)
    assert json.loads(TEXT) == args
    assert (args != json.loads(TEXT)) is False  # str's own __ne__ would say True
    assert args != {"city": "Lyon"}
    assert ToolArguments("not json") != {}


def test_to_dict_gives_a_new_dict_each_time() -> None:
    args = ToolArguments(TEXT)
    first = args.to_dict()
    first["city"] = "Lyon"
    assert args.to_dict()["city"] == "Paris"
    assert args.get("city") == "Paris"


@pytest.mark.parametrize(
    ("text", "expected"),
    [("", {}), ("  \n", {}), ("{}", {}), (json.dumps('{"a": 1}'), {"a": 1})],
)
def test_empty_text_and_an_object_encoded_twice(text: str, expected: dict[str, Any]) -> None:
    # As the runner reads them: nothing is no arguments, a JSON string of an object is it.
    assert ToolArguments(text).to_dict() == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"city": "Par', "The arguments for tool 'w' are not valid JSON (unexpected end"),
        ("[1, 2]", "The arguments for tool 'w' must be a JSON object, not an array."),
        ('"Paris"', "The arguments for tool 'w' must be a JSON object, not a string."),
        ("42", "The arguments for tool 'w' must be a JSON object, not a number."),
        ("null", "The arguments for tool 'w' must be a JSON object, not null."),
    ],
)
def test_text_that_is_not_an_object_raises_on_dict_reads_only(text: str, message: str) -> None:
    args = ToolArguments(text, "w")
    assert args == text  # still the text the model sent
    for read in (lambda: args.get("city"), lambda: args["city"], args.keys, args.to_dict):
        with pytest.raises(ToolParameterError) as caught:
            read()
        assert str(caught.value).startswith(message)
        if len(text) > 4:
            assert text not in str(caught.value)  # the model's text is never repeated


def test_pickle_and_copy_keep_the_text_and_the_tool() -> None:
    args = ToolArguments("{oops", "w")
    for clone in (pickle.loads(pickle.dumps(args)), copy.copy(args), copy.deepcopy(args)):
        assert type(clone) is ToolArguments
        assert clone == "{oops"
        with pytest.raises(ToolParameterError, match="for tool 'w'"):
            clone.get("x")


def test_wire_encoders_send_the_arguments_of_such_a_call() -> None:
    # orjson refuses str subclasses; a history built from seed-style calls must not turn
    # into `{}` on the way back upstream.
    from toolwire.models import AssistantMessage
    from toolwire.models.anthropic_wire import messages_to_anthropic
    from toolwire.models.call_ids import IdMap
    from toolwire.models.openai_wire import message_to_openai
    from toolwire.tools import ToolCall

    call = ToolCall(id="toolu_1", name="w", arguments=ToolArguments(TEXT, "w"))
    message = AssistantMessage(tool_calls=(call,))
    sent = message_to_openai(message)["tool_calls"][0]["function"]["arguments"]
    assert (sent, type(sent)) == (TEXT, str)
    _, blocks = messages_to_anthropic([message], IdMap("keep"))
    assert blocks[0]["content"][0]["input"] == json.loads(TEXT)
