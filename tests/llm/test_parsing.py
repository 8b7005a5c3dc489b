"""Code extraction from model answers: fenced blocks, JSON, prose; failures carry a reason."""

from __future__ import annotations

import pytest

from kernelwright.llm import extract_code, find_json_object
from kernelwright.llm.parsing import NO_CODE_REASON

KERNEL = "import triton\n\ndef softmax(x):\n    return x"


def test_fenced_python_block_inside_prose():
    answer = f"Here is the kernel:\n\n```python\n{KERNEL}\n```\n\nIt fuses the max and the sum."

    result = extract_code(answer)

    assert result.ok and result.code == KERNEL and result.source == "fenced"


def test_block_defining_the_entry_point_wins_over_later_blocks():
    answer = (f"```python\n{KERNEL}\n```\nA helper:\n```python\ndef helper():\n    pass\n```\n"
              "Usage:\n```python\ny = softmax(x)\n```")

    assert extract_code(answer, entry_point="softmax").code == KERNEL


def test_last_defining_block_wins_when_the_model_revises():
    draft = "def softmax(x):\n    return None"
    answer = f"First try:\n```py\n{draft}\n```\nFixed:\n```python\n{KERNEL}\n```"

    assert extract_code(answer, entry_point="softmax").code == KERNEL


def test_usage_example_after_the_code_is_passed_over_without_entry_point():
    answer = f"```python\n{KERNEL}\n```\nCall it like this:\n```python\nout = softmax(x)\n```"

    assert extract_code(answer).code == KERNEL


def test_blocks_in_other_languages_are_ignored():
    answer = f"```bash\npip install triton\n```\n```\n{KERNEL}\n```"

    assert extract_code(answer).code == KERNEL


def test_unterminated_block_from_a_cut_off_answer_still_counts():
    answer = f"```python\n{KERNEL}\n    # and then the answer was cut"

    assert extract_code(answer).code.startswith(KERNEL)


@pytest.mark.parametrize("answer", [
    '{"code": "def softmax(x):\\n    return x", "explanation": "simple"}',
    'Sure! {"code": "def softmax(x):\\n    return x"} Hope this helps.',
    '```json\n{"code": "def softmax(x):\\n    return x"}\n```',
])
def test_json_answer_with_code_field(answer):
    assert extract_code(answer).code == "def softmax(x):\n    return x"


def test_bare_python_answer_without_fences():
    assert extract_code(KERNEL).code == KERNEL


@pytest.mark.parametrize("answer, reason", [
    ("I would use a two-pass reduction over the rows.", NO_CODE_REASON),
    ("", "the answer is empty"),
    (None, "the answer is empty"),
    ('{"explanation": "no code today"}', 'no string "code" field'),
    ('{"code": "   "}', "is empty"),
])
def test_answers_without_code_fail_with_a_reason(answer, reason):
    result = extract_code(answer)

    assert not result.ok and result.code is None
    assert reason in result.failure


def test_find_json_object_skips_braces_that_are_not_json():
    text = 'Use {x} here; the plan: {"steps": [1, 2]} and {"code": "c"}'

    assert find_json_object(text) == {"steps": [1, 2]}
    assert find_json_object(text, required_key="code") == {"code": "c"}
    assert find_json_object("no json") is None


def test_completion_extracts_code_and_records_malformed_answer(scripted, make_client):
    server = scripted({"sequence": [{"content": f"```python\n{KERNEL}\n```"},
                                    {"content": "Sorry, I cannot help with that."}]})
    client = make_client(server)

    good = client.complete([{"role": "user", "content": "a"}]).extract_code("softmax")
    bad = client.complete([{"role": "user", "content": "b"}]).extract_code("softmax")

    assert good.code == KERNEL
    assert not bad.ok and bad.failure == NO_CODE_REASON
