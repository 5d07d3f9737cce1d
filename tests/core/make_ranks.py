"""Write the reference backend's rank tables from an official ``.tiktoken`` file.

    python tests/core/make_ranks.py PATH/o200k_base.tiktoken

The ``.tiktoken`` file is OpenAI's published rank table (``base64(token) rank``
per line, ranks 0..n-1 in order); the Rust crate ships the same files, so after
``cargo fetch`` they are in Cargo's registry (``bpe-openai-*/data/*.tiktoken.gz``
or ``tiktoken-rs-*/assets/*.tiktoken``). The file's SHA-256 must be OpenAI's
published one. The output, ``python/ctxengine/reference/encodings/NAME.ranks.xz``,
is the tokens in rank order, each as one length byte and its bytes, xz-compressed
(about half the size of the base64 text); ``tests/core/test_tokenize.py`` checks it
against the crate's table and against the published hash.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import lzma
import sys
from pathlib import Path

# OpenAI's published SHA-256 of each .tiktoken file (tiktoken_ext.openai_public).
PUBLISHED = {
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
}
OUT = Path(__file__).resolve().parents[2] / "python" / "ctxengine" / "reference" / "encodings"


def tiktoken_text(tokens: list[bytes]) -> bytes:
    """The ``.tiktoken`` file these ranks come from."""
    return b"".join(base64.b64encode(t) + b" " + str(i).encode() + b"\n" for i, t in enumerate(tokens))


def compact(tokens: list[bytes]) -> bytes:
    return b"".join(bytes([len(t)]) + t for t in tokens)


def main(path: str) -> None:
    data = Path(path).read_bytes()
    if path.endswith(".gz"):
        data = gzip.decompress(data)
    name = Path(path).name.split(".")[0]
    if hashlib.sha256(data).hexdigest() != PUBLISHED[name]:
        raise SystemExit(f"{path}: not OpenAI's published {name}")
    tokens = []
    for rank, line in enumerate(data.splitlines()):
        token, number = line.split()
        assert int(number) == rank and len(base64.b64decode(token)) < 256
        tokens.append(base64.b64decode(token))
    assert tiktoken_text(tokens) == data
    raw = compact(tokens)
    out = OUT / f"{name}.ranks.xz"
    out.write_bytes(lzma.compress(raw, preset=9 | lzma.PRESET_EXTREME))
    print(f"{out}: {len(tokens)} ranks, sha256 of the table {hashlib.sha256(raw).hexdigest()}")


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        main(arg)
