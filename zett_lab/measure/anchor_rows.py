"""The per-anchor detail rows of a trace's attempts (``losses.anchors``) and their counts.

Kept as arrays per attempt (:class:`AnchorPart`), joined once into the table (:func:`anchor_table`): a long
conversation has millions of anchor rows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..load.anchors import ANCHOR_TYPES
from .columns import ANCHOR_COLUMNS, ANCHOR_COUNT_COLUMNS, ANCHOR_ROWS, RETENTION_COLUMNS, frame
from .message_index import ConversationIndex, SpanAnchors

#: Index of the constraint type (a report keeps the dropped constraints beside the lost-but-needed rows).
_CONSTRAINT = ANCHOR_TYPES.index("constraint")


@dataclass(frozen=True, slots=True)
class AnchorPart:
    """One attempt's rows of ``losses.anchors``, one per span anchor, as arrays (:func:`anchor_table` joins them)."""

    #: The attempt's constant columns (conversation, summarizer, compaction_id, applied).
    where: dict[str, Any]
    span: SpanAnchors
    in_summary: np.ndarray
    needed_later: np.ndarray
    refetched: np.ndarray

    @property
    def lost_but_needed(self) -> np.ndarray:
        """Needed later and not in the summary."""
        return self.needed_later & ~self.in_summary


def anchor_table(index: ConversationIndex, parts: Sequence[AnchorPart]) -> pd.DataFrame:
    """``losses.anchors`` of a trace: every attempt's rows, with the dtypes :func:`~zett_lab.measure.columns.frame`
    gives ``ANCHOR_COLUMNS``.

    Built once from the joined arrays, the texts taken by key id: a long conversation has
    millions of these rows, so neither per-row Python objects nor a table per attempt.
    """
    if not parts:
        return frame([], ANCHOR_COLUMNS)
    sizes = [len(part.span.ids) for part in parts]

    def joined(values: Callable[[AnchorPart], np.ndarray]) -> np.ndarray:
        return np.concatenate([values(part) for part in parts])

    def flags(values: np.ndarray) -> Any:
        return pd.array(values.astype(bool), dtype="boolean")

    def repeated(name: str) -> Any:
        values = [part.where[name] for part in parts]
        if all(isinstance(v, (bool, np.bool_)) for v in values):
            return flags(np.repeat(np.array(values, dtype=bool), sizes))
        if all(isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) for v in values):
            return pd.array(np.repeat(np.array(values, dtype=np.int64), sizes), dtype="Int64")
        column = np.empty(len(values), dtype=object)
        column[:] = values
        return pd.Series(np.repeat(column, sizes), dtype=object, copy=False)

    arrays = index.arrays
    ids = joined(lambda part: part.span.ids)
    next_use = joined(lambda part: part.span.next_use)
    in_summary, needed_later = joined(lambda part: part.in_summary), joined(lambda part: part.needed_later)
    columns = {
        **{name: repeated(name) for name in parts[0].where},
        "type": pd.Series(arrays.type_names[ids], dtype=object, copy=False),
        "value": pd.Series(arrays.first_values[ids], dtype=object, copy=False),
        "normalized": pd.Series(arrays.normalized[ids], dtype=object, copy=False),
        "message_index": pd.array(joined(lambda part: part.span.first_index).astype(np.int64), dtype="Int64"),
        "in_summary": flags(in_summary),
        "in_tail": flags(joined(lambda part: part.span.in_tail)),
        "in_future": flags(joined(lambda part: part.span.in_future)),
        "next_use_index": pd.arrays.IntegerArray(np.maximum(next_use, 0).astype(np.int64), next_use < 0),
        "rarity": arrays.rarity[ids].astype(np.float64),
        "needed_later": flags(needed_later),
        "lost_but_needed": flags(joined(lambda part: part.lost_but_needed)),
        "refetched": flags(joined(lambda part: part.refetched)),
    }
    # copy=False: the arrays are new already, and consolidating them would copy millions of rows again.
    return pd.DataFrame(columns, columns=list(ANCHOR_COLUMNS), copy=False)


@dataclass
class AnchorRows:
    """The per-anchor rows of a trace's attempts as :class:`AnchorPart` arrays, kept as the caller asks.

    Every row (``losses.anchors``), or (``lost_only``) only the rows :meth:`Losses.listed` keeps (lost but
    needed, dropped constraints), with every row's :data:`~zett_lab.measure.columns.RETENTION_COLUMNS` counted as the attempts
    come (:meth:`counts`): what a report keeps. A long conversation's cumulative spans make millions
    of rows, hundreds of MB even as arrays.

    Not frozen: it holds the anchor types' codes, made at the first attempt that needs them.
    """

    lost_only: bool = False
    parts: list[AnchorPart] = field(default_factory=list)
    _counted: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)
    _types: tuple[np.ndarray, Any] | None = None

    def add(self, index: ConversationIndex, part: AnchorPart) -> None:
        if not self.lost_only:
            self.parts.append(part)
            return
        if self._types is None:
            self._types = pd.factorize(index.arrays.type_names, sort=True)
        applied = bool(part.where["applied"])
        flags = {
            "applied": np.full(len(part.span.ids), applied),
            "in_summary": part.in_summary,
            "in_tail": part.span.in_tail,
            "needed_later": part.needed_later,
            "lost_but_needed": part.lost_but_needed,
        }
        self._counted.append(np.unique(_flag_codes(self._types[0][part.span.ids], flags), return_counts=True))
        constraint = index.arrays.type_code[part.span.ids] == _CONSTRAINT
        listed = flags["lost_but_needed"] | (constraint & ~part.in_summary & ~part.span.in_tail)
        if applied and listed.any():
            self.parts.append(_rows(part, listed))

    def counts(self) -> pd.DataFrame:
        """The flags of every row added, counted (what :func:`retention_counts` gives of the whole table)."""
        if self._types is None:
            return _no_counts()
        codes = np.concatenate([codes for codes, _ in self._counted])
        distinct, where = np.unique(codes, return_inverse=True)
        counts = np.bincount(where, weights=np.concatenate([n for _, n in self._counted]), minlength=len(distinct))
        return _count_table(distinct, counts.astype(np.int64), self._types[1])


def _rows(part: AnchorPart, keep: np.ndarray) -> AnchorPart:
    span = part.span
    return AnchorPart(
        part.where,
        SpanAnchors(
            ids=span.ids[keep],
            first_index=span.first_index[keep],
            in_tail=span.in_tail[keep],
            in_future=span.in_future[keep],
            next_use=span.next_use[keep],
            needed_later=span.needed_later[keep],
        ),
        part.in_summary[keep],
        part.needed_later[keep],
        part.refetched[keep],
    )


def retention_counts(anchors: pd.DataFrame) -> pd.DataFrame:
    """The :data:`~zett_lab.measure.columns.RETENTION_COLUMNS` of a per-anchor table (missing flags: False),
    counted per distinct row (:data:`~zett_lab.measure.columns.ANCHOR_COUNT_COLUMNS`).

    What the anchor-retention figure draws, in at most a few hundred rows instead of one per anchor
    (sorted by type, then by the flags, False first; rows without a type are not counted).
    """
    if not len(anchors):
        return _no_counts()
    types, type_names = pd.factorize(anchors["type"], sort=True)
    flags = {name: anchors[name].astype("boolean").fillna(False).to_numpy(dtype=bool) for name in RETENTION_COLUMNS[1:]}
    distinct, counts = np.unique(_flag_codes(types, flags), return_counts=True)
    return _count_table(distinct, counts, type_names)


def _flag_codes(types: np.ndarray, flags: dict[str, np.ndarray]) -> np.ndarray:
    """One integer per row: its type code, then one bit per flag (rows without a type, code -1, left out)."""
    names = RETENTION_COLUMNS[1:]
    code = types.astype(np.int64) << len(names)
    for bit, name in enumerate(reversed(names)):
        code |= flags[name].astype(np.int64) << bit
    return code[types >= 0]


def _no_counts() -> pd.DataFrame:
    return _count_table(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), [])


def _count_table(distinct: np.ndarray, counts: np.ndarray, type_names: Sequence[Any] | pd.Index) -> pd.DataFrame:
    """Distinct :func:`_flag_codes` and how many rows had each, as :data:`ANCHOR_COUNT_COLUMNS`."""
    names = RETENTION_COLUMNS[1:]
    table = {"type": pd.Series(np.asarray(type_names, dtype=object)[distinct >> len(names)], dtype=object)}
    for bit, name in enumerate(reversed(names)):
        table[name] = pd.Series((distinct >> bit) & 1 == 1, dtype=bool)
    table[ANCHOR_ROWS] = pd.Series(counts, dtype=np.int64)
    return pd.DataFrame(table, columns=list(ANCHOR_COUNT_COLUMNS))
