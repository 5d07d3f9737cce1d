"""The binding's budget (issue 38): ``rust/py/src`` stays a thin converter over the pure core.

Issue 38's target is at most 4,000 lines and at most 60 uses of ``unsafe`` outside comments.
The constants below are the numbers the binding has reached so far: a ratchet. They only
ever go down; lower them when a change shrinks the binding, never raise them (move the
logic into ``rust/core`` instead). Every ``unsafe`` block carries a ``// SAFETY:`` comment
on the line(s) just above it, saying why it holds.
"""

from __future__ import annotations

import re
from pathlib import Path

BINDING = Path(__file__).resolve().parents[1] / "rust" / "py" / "src"

#: Lines of ``rust/py/src/**/*.rs`` (issue 38's target: 4,000). Only ever lowered.
MAX_LINES = 4_702
#: Uses of the ``unsafe`` keyword outside comments and strings (target: 60). Only ever lowered.
MAX_UNSAFE = 38
#: Files whose ``unsafe`` blocks were not all documented when the rule came in, with how
#: many are not. Every block is documented now: entries may never be added again.
UNDOCUMENTED: dict[str, int] = {}

_RAW_STRING = re.compile(r'b?r(#*)"')
_CHAR = re.compile(r"'(\\.[^']*|[^'\\])'")
_UNSAFE = re.compile(r"\bunsafe\b\s*(\{)?")


def code_lines(source: str) -> list[str]:
    """``source`` with comments and string and char literals blanked, line for line."""
    out: list[str] = []
    i, n = 0, len(source)
    while i < n:
        if source.startswith("//", i):
            end = source.find("\n", i)
            i = n if end < 0 else end
            continue
        if source.startswith("/*", i):
            end = source.index("*/", i) + 2
        elif (m := _RAW_STRING.match(source, i)) and not (
            i and (source[i - 1].isalnum() or source[i - 1] == "_")
        ):
            closing = '"' + m.group(1)
            end = source.index(closing, m.end()) + len(closing)
        elif source[i] == '"' or source.startswith('b"', i):
            end = i + (2 if source[i] == "b" else 1)
            while source[end] != '"':
                end += 2 if source[end] == "\\" else 1
            end += 1
        elif source[i] == "'" and (m := _CHAR.match(source, i)):
            end = m.end()
        else:
            out.append(source[i])
            i += 1
            continue
        out.append("\n" * source.count("\n", i, end))
        i = end
    return "".join(out).split("\n")


def unsafe_uses(source: str) -> tuple[int, list[int]]:
    """The ``unsafe`` keywords outside comments and strings, and the (1-based) lines of the
    blocks without a ``// SAFETY:`` comment in the comment lines just above them."""
    raw = source.split("\n")
    uses, undocumented = 0, []
    for k, line in enumerate(code_lines(source)):
        for m in _UNSAFE.finditer(line):
            uses += 1
            if m.group(1) is None:
                continue  # `unsafe fn` / `unsafe impl`: documented by their `# Safety` docs
            j, documented = k - 1, False
            while j >= 0 and raw[j].lstrip().startswith("//"):
                documented = documented or raw[j].lstrip().startswith("// SAFETY:")
                j -= 1
            if not documented:
                undocumented.append(k + 1)
    return uses, undocumented


def sources() -> dict[str, str]:
    return {p.relative_to(BINDING).as_posix(): p.read_text() for p in sorted(BINDING.rglob("*.rs"))}


def test_the_counter_skips_comments_and_strings() -> None:
    source = (
        "// unsafe { in a comment }\n"
        "/* unsafe\n unsafe { */\n"
        'let s = "unsafe { }"; let r = r#"unsafe {"#; let c = \'"\';\n'
        "// SAFETY: a reason.\n"
        "let a = unsafe { f() };\n"
        "let b = unsafe { g() };\n"
        "// not the word\n"
        "unsafe {\n"
        "}\n"
        "pub unsafe fn h() {}\n"
    )
    assert unsafe_uses(source) == (4, [7, 9])


def test_the_binding_stays_within_its_budget() -> None:
    files = sources()
    lines = sum(text.count("\n") for text in files.values())
    uses = sum(unsafe_uses(text)[0] for text in files.values())
    assert lines <= MAX_LINES, (
        f"rust/py/src has {lines} lines, more than {MAX_LINES}: move logic into rust/core"
    )
    assert uses <= MAX_UNSAFE, f"rust/py/src uses unsafe {uses} times, more than {MAX_UNSAFE}"


def test_every_unsafe_block_says_why_it_holds() -> None:
    missing = {}
    for name, text in sources().items():
        lines = unsafe_uses(text)[1]
        if len(lines) > UNDOCUMENTED.get(name, 0):
            missing[name] = lines
    assert not missing, f"unsafe blocks without a // SAFETY: comment just above: {missing}"
    assert set(UNDOCUMENTED) <= set(sources()), "a file in UNDOCUMENTED no longer exists: remove it"
