"""The terminal output of the command line: rich when the ``cli`` extra installed it, plain
text otherwise (the same tables, aligned in columns, with the styles dropped).

Only what the commands use is offered: ``Console`` (``print``, ``is_terminal``), ``Table``
(``add_column``, ``add_row``), ``Text`` (``append``, ``assemble``) and ``escape``. Cells from a
store or a model reach either as ``Text`` (made visible by ``terminal.visible`` first), never
as markup.
"""

from __future__ import annotations

import re
import sys
from typing import IO, Any

try:
    import rich  # noqa: F401
except ImportError:  # pragma: no cover - exercised by tests/cli/test_plain_console.py in a subprocess
    RICH = False
else:
    RICH = True

#: The rich styles the commands' own markup uses, dropped by the plain console.
_MARKUP = re.compile(r"\[/?(?:bold|dim|red|green|yellow)(?: (?:bold|dim|red|green|yellow))*\]")


class PlainText:
    """``rich.text.Text`` without styles: the text as given, never read as markup."""

    def __init__(self, text: str = "") -> None:
        self.plain = text

    def append(self, text: str) -> None:
        self.plain += text

    @classmethod
    def assemble(cls, *parts: str | tuple[str, str]) -> PlainText:
        return cls("".join(part if isinstance(part, str) else part[0] for part in parts))

    def __str__(self) -> str:
        return self.plain


def _cell(value: object) -> str:
    return value.plain if isinstance(value, PlainText) else _MARKUP.sub("", str(value))


class PlainTable:
    """``rich.table.Table`` as aligned plain text: a title line, a header, one line a row (a
    cell's own line breaks continue in its column)."""

    def __init__(self, title: str = "", title_justify: str = "left", show_header: bool = True) -> None:
        self.title = title
        self.show_header = show_header
        self.columns: list[tuple[str, str]] = []
        self.rows: list[list[str]] = []

    def add_column(self, header: str, justify: str = "left") -> None:
        self.columns.append((header, justify))

    def add_row(self, *cells: object) -> None:
        self.rows.append([_cell(cell) for cell in cells])

    def lines(self) -> list[str]:
        grid = [[h for h, _ in self.columns]] if self.show_header else []
        for row in self.rows:
            split = [cell.split("\n") for cell in row]
            grid.extend(
                [part[i] if i < len(part) else "" for part in split] for i in range(max(map(len, split)))
            )
        widths = [max((len(r[i]) for r in grid if i < len(r)), default=0) for i in range(len(self.columns))]
        out = [self.title] if self.title else []
        for r in grid:
            cells = [
                (c.rjust(w) if justify == "right" else c.ljust(w))
                for c, w, (_, justify) in zip(r, widths, self.columns, strict=False)
            ]
            out.append("  ".join(cells).rstrip())
        return out


class PlainConsole:
    """``rich.console.Console`` reduced to ``print``: styles dropped, tables as aligned text."""

    def __init__(self, stderr: bool = False, file: IO[str] | None = None) -> None:
        self._stderr = stderr
        self._file = file

    @property
    def file(self) -> IO[str]:
        return self._file or (sys.stderr if self._stderr else sys.stdout)

    @property
    def is_terminal(self) -> bool:
        return bool(getattr(self.file, "isatty", lambda: False)())

    def print(self, *objects: Any) -> None:
        for value in objects:
            if isinstance(value, PlainTable):
                text = "\n".join(value.lines())
            else:
                text = _cell(value)
            print(text, file=self.file)


def plain_escape(text: str) -> str:
    return text


if RICH:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table
    from rich.text import Text
else:  # pragma: no cover - see above
    Console = PlainConsole  # type: ignore[assignment,misc]
    Table = PlainTable  # type: ignore[assignment,misc]
    Text = PlainText  # type: ignore[assignment,misc]
    escape = plain_escape  # type: ignore[assignment]

__all__ = ["RICH", "Console", "PlainConsole", "PlainTable", "PlainText", "Table", "Text", "escape"]
