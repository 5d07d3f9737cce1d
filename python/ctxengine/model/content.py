"""Content parts (text, file references) and the content of a message."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from ..errors import ModelValidationError
from .checks import JSON, _get, _text


@dataclass(frozen=True, slots=True)
class TextPart:
    text: str
    kind: ClassVar[str] = "text_part"

    def __post_init__(self) -> None:
        _text("TextPart", "text", self.text)

    def to_dict(self) -> dict[str, JSON]:
        return {"type": self.kind, "text": self.text}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TextPart:
        return cls(_get(d, "TextPart", "text"))


@dataclass(frozen=True, slots=True)
class FileRef:
    artifact_id: str
    media_type: str
    filename: str | None = None
    kind: ClassVar[str] = "file_ref"

    def __post_init__(self) -> None:
        _text("FileRef", "artifact_id", self.artifact_id)
        _text("FileRef", "media_type", self.media_type)
        if self.filename is not None:
            _text("FileRef", "filename", self.filename)

    def to_dict(self) -> dict[str, JSON]:
        return {
            "type": self.kind,
            "artifact_id": self.artifact_id,
            "media_type": self.media_type,
            "filename": self.filename,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> FileRef:
        return cls(
            _get(d, "FileRef", "artifact_id"),
            _get(d, "FileRef", "media_type"),
            _get(d, "FileRef", "filename", None),
        )


ContentPart = TextPart | FileRef
Content = str | tuple[ContentPart, ...]


def _content(type_name: str, value: object) -> Content:
    if isinstance(value, str):
        _text(type_name, "content", value)
        return value
    if isinstance(value, (list, tuple)):
        for i, part in enumerate(value):
            if not isinstance(part, (TextPart, FileRef)):
                raise ModelValidationError(
                    type_name, f"content[{i}]", f"expected TextPart or FileRef, got {type(part).__name__}"
                )
        return tuple(value)
    raise ModelValidationError(type_name, "content", f"expected str or parts, got {type(value).__name__}")


def _content_to_json(content: Content) -> JSON:
    if isinstance(content, str):
        return content
    return [part.to_dict() for part in content]


def _content_from_json(type_name: str, value: Any) -> Content:
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        raise ModelValidationError(type_name, "content", f"expected str or list, got {type(value).__name__}")
    parts: list[ContentPart] = []
    for i, raw in enumerate(value):
        tag = raw.get("type") if isinstance(raw, dict) else None
        if tag == "text_part":
            parts.append(TextPart.from_dict(raw))
        elif tag == "file_ref":
            parts.append(FileRef.from_dict(raw))
        else:
            raise ModelValidationError(type_name, f"content[{i}]", f"unknown part type {tag!r}")
    return tuple(parts)


def content_text(content: Content) -> str:
    """The text of a content value; file references render as placeholders."""
    if isinstance(content, str):
        return content
    out = []
    for part in content:
        if isinstance(part, TextPart):
            out.append(part.text)
        else:
            out.append(f"[file {part.artifact_id} {part.media_type}]")
    return "\n".join(out)
