"""Seeded benchmark data, generated once and reused.

``--quick`` and ``--rows`` data lives under ``<work_dir>/data/<files>x<size>B/``
(keyed by geometry); a named scenario's rows live under
``<work_dir>/data/<scenario>/x<scale>/<row>/`` (:func:`scenario_data_dir`).
A directory is reused when it holds exactly the expected files with the
expected sizes.

Random rows hold incompressible bytes from :class:`random.Random` seeded
with ``(seed, files, size, index)``, so every run (and every machine)
benchmarks the same bytes. Text rows hold generated English-like text:
words drawn from a seeded vocabulary with a Zipf distribution, in
sentences and lines; zlib compresses it to about a third, like real prose
(zstd level 3 to about 0.34: docs/compression.md). It stands for the
Wikipedia dump Skyplane's compression case splits in 16 MiB pieces (the
skyplane scenario's ``text-16MiB-shards``). Nothing is downloaded.
"""

from __future__ import annotations

import bisect
import itertools
import os
import random
import shutil
import zlib
from pathlib import Path

from synxfer import MiB

from .scenarios import Row

__all__ = [
    "CHANGED_GROWTH",
    "CHUNK",
    "compression_ratio",
    "derived_copy",
    "ensure_changed_copy",
    "ensure_row_data",
    "expected_files",
    "expected_sizes",
    "row_data_dir",
    "scenario_data_dir",
    "text_bytes",
]

#: Bytes written per write call.
CHUNK = MiB
#: Files per subdirectory for rows with many files.
FANOUT = 1000
#: Bytes appended to each changed file of a periodic-sync row, so that a
#: tool that skipped the change is caught by the size check.
CHANGED_GROWTH = 1024


def row_data_dir(work_dir: Path, row: Row) -> Path:
    """Where the files of a ``--quick``/``--rows`` row live (keyed by geometry, not by name)."""
    return work_dir / "data" / f"{row.files}x{row.size}B"


def scenario_data_dir(work_dir: Path, scenario: str, scale: float, row: Row) -> Path:
    """Where the files of a named scenario's row live, per ``(scenario, scale)``."""
    safe = "".join(c if c.isalnum() or c in "-._" else "_" for c in row.name)
    return work_dir / "data" / scenario / f"x{scale:g}" / safe


def expected_files(row: Row) -> list[str]:
    """Relative paths of the row's files (``/``-separated)."""
    ext = ".txt" if row.data == "text" else ".bin"
    names = [f"f{i:06d}{ext}" for i in range(row.files)]
    if row.files <= FANOUT:
        return names
    return [f"d{i // FANOUT:04d}/{name}" for i, name in enumerate(names)]


def expected_sizes(row: Row, *, changed: bool = False) -> dict[str, int]:
    """``{relative path: size}`` of the row; ``changed`` for its periodic-sync copy."""
    sizes = dict(zip(expected_files(row), row.file_sizes(), strict=True))
    if changed:
        for rel in changed_files(row):
            sizes[rel] += CHANGED_GROWTH
    return sizes


def changed_files(row: Row, fraction: float = 0.05) -> list[str]:
    """The files a periodic-sync row changes: every 20th one (5 %), at least one."""
    names = expected_files(row)
    step = max(1, round(1 / fraction))
    return names[::step] or names[:1]


def _matches(root: Path, want: dict[str, int]) -> bool:
    found: dict[str, int] = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            full = Path(dirpath) / name
            found[full.relative_to(root).as_posix()] = full.stat().st_size
    return found == want


# --------------------------------------------------------------------------- content


def _write_random(path: Path, size: int, rng: random.Random) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("wb") as f:
        left = size
        while left > 0:
            n = min(CHUNK, left)
            f.write(rng.randbytes(n))
            left -= n
    tmp.replace(path)


# fmt: off
_SYLLABLES = (
    "a", "e", "i", "o", "u", "ba", "be", "bi", "bo", "bu", "ca", "ce", "ci", "co", "da", "de",
    "di", "do", "fa", "fe", "fi", "ga", "ge", "go", "ha", "he", "hi", "ho", "la", "le", "li",
    "lo", "lu", "ma", "me", "mi", "mo", "na", "ne", "ni", "no", "pa", "pe", "pi", "po", "ra",
    "re", "ri", "ro", "sa", "se", "si", "so", "ta", "te", "ti", "to", "va", "ve", "vi", "wa",
    "we", "ya", "th", "st", "ch", "sh", "an", "en", "in", "on", "er", "ar", "or", "al", "el",
    "il", "ou", "ea",
)
# fmt: on
_VOCABULARY = 6000
#: Words drawn at a time (part of what the corpus is: changing it changes the bytes).
_BATCH = 8192


class _TextModel:
    """Words from a seeded vocabulary, Zipf-distributed (rank ** -1.1), like prose."""

    def __init__(self, seed: object) -> None:
        rng = random.Random(f"vocabulary:{seed}")
        words: list[str] = []
        seen: set[str] = set()
        while len(words) < _VOCABULARY:
            word = "".join(rng.choice(_SYLLABLES) for _ in range(rng.choice((1, 2, 2, 3, 3, 4))))
            if word not in seen:
                seen.add(word)
                words.append(word)
        self.words = words
        self.cum_weights = list(
            itertools.accumulate(1 / (r**1.1) for r in range(1, len(words) + 1))
        )

    def text(self, size: int, rng: random.Random) -> bytes:
        """``size`` bytes of sentences and lines, in batches of :data:`_BATCH` words.

        Per batch: the words (``rng.choices`` over the Zipf weights), then one
        ``rng.randint(6, 20)`` per sentence begun in the batch; a sentence ends
        in ``.`` (else every 17th word in ``,``), starts capitalized, and a
        line breaks after the word that takes it past 72 characters.

        Why numpy here: the corpus of the skyplane scenario is 1024 shards of
        16 MiB, and word by word in Python a shard took 8.7 s of CPU (2.5 h
        for the corpus). numpy's legacy ``RandomState`` is the same Mersenne
        Twister with the same 53-bit doubles as :mod:`random`, so the batch's
        ``rng.choices`` is drawn there from ``rng``'s own state, handed back
        after; sentences and lines are found with a few hundred steps per
        batch instead of one per word. The bytes are the ones the word-by-word
        generator made (tests/test_bench_skyplane.py pins them): a corpus
        already on disk, or behind a published figure, stays the one meant.
        """
        import numpy as np

        words = np.asarray(self.words, dtype=object)
        capitals = [w.capitalize() for w in self.words]
        lengths = np.asarray([len(w) + 1 for w in self.words], dtype=np.int64)
        cum_weights = np.asarray(self.cum_weights, dtype=np.float64)
        total, last = self.cum_weights[-1], len(self.words) - 1
        mt = np.random.RandomState()
        plain = [", " if i % 17 == 16 else " " for i in range(_BATCH)]
        out: list[str] = [""] * (2 * _BATCH)
        parts: list[str] = []
        produced = 0
        while produced < size:
            # rng.choices(words, cum_weights=..., k=_BATCH), drawn by numpy.
            version, internal, gauss = rng.getstate()
            key = np.asarray(internal[:-1], dtype=np.uint32)
            mt.set_state(("MT19937", key, internal[-1], 0, 0.0))
            draws = mt.random_sample(_BATCH)
            state = mt.get_state(legacy=False)
            assert isinstance(state, dict)
            after = state["state"]
            rng.setstate((version, (*after["key"].tolist(), int(after["pos"])), gauss))
            picked = np.minimum(np.searchsorted(cum_weights, draws * total, side="right"), last)
            tokens: list[str] = words[picked].tolist()
            suffix = plain.copy()
            end = 0
            while True:  # each sentence: its length drawn where it begins
                end += rng.randint(6, 20)
                if end > _BATCH:
                    break
                suffix[end - 1] = ". "
                if end == _BATCH:
                    break
                tokens[end] = capitals[int(picked[end])]
            # A line ends at the first word whose end is past 72 characters from its start.
            ends = np.cumsum(lengths[picked]).tolist()
            i = bisect.bisect_right(ends, 72)
            while i < _BATCH:
                suffix[i] = suffix[i][:-1] + "\n"
                i = bisect.bisect_right(ends, ends[i] + 72, i + 1)
            out[0::2] = tokens
            out[1::2] = suffix
            chunk = "".join(out)
            parts.append(chunk)
            produced += len(chunk)
        return "".join(parts).encode("ascii")[:size]


_MODELS: dict[int, _TextModel] = {}


def text_bytes(size: int, *, seed: int = 0, stream: object = 0) -> bytes:
    """``size`` bytes of generated text, deterministic in ``(seed, stream)``."""
    model = _MODELS.get(seed)
    if model is None:
        model = _MODELS[seed] = _TextModel(seed)
    return model.text(size, random.Random(f"text:{seed}:{stream}"))


def _write_text(path: Path, size: int, seed: int, stream: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(text_bytes(size, seed=seed, stream=stream))
    tmp.replace(path)


def _rng(seed: int, row: Row, index: int) -> random.Random:
    if row.groups:
        return random.Random(f"{seed}:{row.name}:{row.files}:{row.total_bytes}:{index}")
    # Same key as before mixed rows existed, so quick data stays reusable.
    return random.Random(f"{seed}:{row.files}:{row.size}:{index}")


def ensure_row_data(
    work_dir: Path, row: Row, *, seed: int = 0, root: Path | None = None
) -> tuple[Path, bool]:
    """Make sure the files of ``row`` exist; returns ``(directory, generated)``.

    ``root`` defaults to :func:`row_data_dir`. ``generated`` is False when
    matching data was already there.
    """
    root = root if root is not None else row_data_dir(work_dir, row)
    want = expected_sizes(row)
    if root.is_dir() and _matches(root, want):
        return root, False
    if root.exists():
        shutil.rmtree(root)
    for index, (rel, size) in enumerate(want.items()):
        if row.data == "text":
            _write_text(root / rel, size, seed, f"{row.name}:{index}")
        else:
            _write_random(root / rel, size, _rng(seed, row, index))
    return root, True


def ensure_changed_copy(src: Path, row: Row, *, seed: int = 0) -> tuple[Path, bool]:
    """The periodic-sync copy of ``src``: 95 % hard links, 5 % rewritten and 1 KiB longer.

    Lives beside ``src`` as ``<src>.changed``; the changed files get new
    content and a newer mtime, the others keep both, so every sync tool
    sees exactly the changed files as changed.
    """
    dst = src.with_name(src.name + ".changed")
    want = expected_sizes(row, changed=True)
    return derived_copy(src, dst, row, want, set(changed_files(row)), f"changed:{seed}")


def derived_copy(
    base: Path, dst: Path, row: Row, want: dict[str, int], rewrite: set[str], tag: str
) -> tuple[Path, bool]:
    """``dst``: ``base``'s files hard-linked (copied where links fail), those
    in ``rewrite`` written afresh with seeded random bytes at their ``want``
    size; kept as is when it already holds ``want``. Returns ``(dst, made)``."""
    if dst.is_dir() and _matches(dst, want):
        return dst, False
    if dst.exists():
        shutil.rmtree(dst)
    for index, rel in enumerate(expected_files(row)):
        target = dst / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if rel in rewrite:
            _write_random(target, want[rel], random.Random(f"{tag}:{row.name}:{index}"))
        else:
            try:
                os.link(base / rel, target)
            except OSError:
                shutil.copy2(base / rel, target)
    return dst, True


def compression_ratio(root: Path, *, level: int = 6, sample: int = 64 * MiB) -> float:
    """zlib (level ``level``) compressed / original size, over up to ``sample`` bytes of files."""
    original = compressed = 0
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        with path.open("rb") as f:
            data = f.read(max(0, sample - original))
        if not data:
            break
        original += len(data)
        compressed += len(zlib.compress(data, level))
        if original >= sample:
            break
    return compressed / original if original else 1.0
