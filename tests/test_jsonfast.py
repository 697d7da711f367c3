"""kirolearn.core.jsonfast gives what the json package gives, errors included."""

import io
import json
import subprocess
import sys

import pytest

from kirolearn.core import jsonfast

VALUES = [
    {},
    [],
    "",
    0,
    -1,
    1.5,
    1e300,
    float("inf"),
    float("-inf"),
    True,
    False,
    None,
    10**30,
    {"a": [1, 2.25, {"b": None}], "é": "naïve ☃ \U0001f600", "ctrl": '\x00\x1f\u2028\n\t"\\'},
    ["lone \ud800 surrogate"],
    {"nested": [[[[{"x": "y"}]]]]},
    {1: "int key", None: "null key", 2.5: "float key"},
]
DOCS = [
    '{"a": 1}',
    "  [1, 2]\n",
    '"x"',
    "3",
    "-0.5e3",
    "null",
    "true",
    "NaN",
    "-Infinity",
    '{"a": {"b": [1]}}',
    '{"k": "\\u00e9\\ud83d\\ude00"}',
    '{"dup": 1, "dup": 2}',
    " \t\r\n{}\r\n",
]
BAD = [
    "",
    "   ",
    "{",
    "[1,]",
    '{"a" 1}',
    "nul",
    "1 2",
    '{"a": 1} x',
    "\ufeff{}",
    '"unterminated',
    "[" * 100000,
    '{"a": "\x01"}',
]


@pytest.mark.parametrize("value", VALUES)
@pytest.mark.parametrize("ensure_ascii", [True, False])
@pytest.mark.parametrize("separators", [None, (",", ":")])
def test_dumps_matches_json(value, ensure_ascii, separators):
    assert jsonfast.dumps(value, ensure_ascii=ensure_ascii, separators=separators) == json.dumps(
        value, ensure_ascii=ensure_ascii, separators=separators
    )


@pytest.mark.parametrize("doc", DOCS + [json.dumps(v) for v in VALUES])
def test_loads_matches_json(doc):
    assert repr(jsonfast.loads(doc)) == repr(json.loads(doc))
    assert repr(jsonfast.load(io.StringIO(doc))) == repr(json.load(io.StringIO(doc)))


@pytest.mark.parametrize("doc", BAD)
def test_loads_raises_what_json_raises(doc):
    with pytest.raises(Exception) as expected:
        json.loads(doc)
    with pytest.raises(expected.type) as got:
        jsonfast.loads(doc)
    assert str(got.value) == str(expected.value)


def test_unserialisable_values_raise_type_error_and_circles_value_error():
    with pytest.raises(TypeError, match="not JSON serializable"):
        jsonfast.dumps({"s": {1, 2}})
    loop: list = []
    loop.append(loop)
    with pytest.raises(ValueError):
        jsonfast.dumps(loop)


def test_errors_are_json_errors_in_a_process_that_never_imported_json():
    """_json builds its exceptions from json.decoder only when something imported it already."""
    code = (
        "import sys; from kirolearn.core import jsonfast\n"
        "assert 'json' not in sys.modules and jsonfast.loads('[1]') == [1]\n"
        "for doc in ['{', '\"abc', '[1,]', '{\"a\": 1} x']:\n"
        "    try:\n        jsonfast.loads(doc)\n    except ValueError as exc:\n"
        "        assert type(exc).__name__ == 'JSONDecodeError', exc\n"
        "    else:\n        raise AssertionError(doc)\n"
        "print('ok')"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "ok", out.stderr


def test_it_uses_the_c_accelerator_on_cpython():
    assert jsonfast._scan is not None
