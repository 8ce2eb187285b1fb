"""Real text that ships with every CPython, as token ids for a small language model.

``load_python_docs()`` is the text of Python's own reference documentation
(``pydoc_data.topics``, the pages ``help("if")`` shows; about 460,000 characters). Some
distributions strip ``pydoc_data``; the fallback is the docstrings of the standard library's
builtins, the same kind of English-and-code text, smaller. ``source`` says which one it was.

``char_dataset`` turns the text into character ids (printable ASCII plus newline: the ids are
the byte values, so the vocabulary has ``VOCABULARY = 128`` entries and no table is needed)
cut into windows ``x = ids[i:i+T]``, ``y = ids[i+1:i+T+1]`` (next-character prediction).
"""

from __future__ import annotations

import builtins
import inspect
from dataclasses import dataclass

import numpy as np

from nn.engine.checks import count

VOCABULARY = 128  # ASCII: a character's id is its byte value


@dataclass(frozen=True)
class Text:
    """A corpus and where it came from (``"pydoc_data.topics"`` or ``"builtins docstrings"``)."""

    text: str
    source: str


def load_python_docs() -> Text:
    """The text of Python's reference documentation (see the module docstring)."""
    try:
        from pydoc_data.topics import topics
    except ImportError:
        docs = (inspect.getdoc(getattr(builtins, name)) for name in sorted(dir(builtins)))
        return Text("\n\n".join(d for d in docs if d), "builtins docstrings")
    return Text("\n\n".join(topics[key] for key in sorted(topics)), "pydoc_data.topics")


def char_ids(text: str) -> np.ndarray:
    """The characters of ``text`` as ids 0..127 (int64); a non-ASCII character becomes "?"."""
    return np.frombuffer(text.encode("ascii", "replace"), dtype=np.uint8).astype(np.int64)


def char_dataset(sequence_length: int, samples: int, *, seed: int = 0, text: Text | None = None,
                 held_out: float = 0.1) -> tuple[tuple[np.ndarray, np.ndarray],
                                                  tuple[np.ndarray, np.ndarray]]:
    """``((x, y), (x_test, y_test))``: ``samples`` training windows of ``sequence_length``
    character ids and their next characters, drawn (seeded) from the first ``1 - held_out`` of
    the text, and up to ``samples // 4`` held-out windows from the rest; integer arrays."""
    length = count("char_dataset: sequence_length", sequence_length, minimum=1)
    samples = count("char_dataset: samples", samples, minimum=1)
    ids = char_ids((text or load_python_docs()).text)
    cut = int(len(ids) * (1 - held_out))
    rng = np.random.default_rng(seed)

    def windows(part: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
        starts = rng.integers(0, len(part) - length - 1, n)
        index = starts[:, None] + np.arange(length + 1)[None, :]
        w = part[index]
        return w[:, :-1], w[:, 1:]

    return windows(ids[:cut], samples), windows(ids[cut:], max(samples // 4, 1))
