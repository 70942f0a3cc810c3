"""The base of records that carry their token explanation's record: words and generations."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Optional, TypeVar, cast

from torchlime.engine.info import Info, check_record
from torchlime.text._tokens import TokensInfo

WithTokensT = TypeVar("WithTokensT", bound="WithTokens")


def rows(value: object) -> Any:
    """Stored per-input rows (a list of B lists) as fresh lists, None kept: a record's field read back."""
    return None if value is None else [list(v) for v in cast(list[list[object]], value)]


@dataclass(frozen=True)
class WithTokens(Info):
    """A record that carries its token explanation's ``TokensInfo`` (``token_info``), cut and stored with it.

    The records of word and generation explanations derive from it; the field is keyword-only, so it comes
    after their own fields.

    Attributes:
        token_info: the ``TokensInfo`` of the token explanation, or None.
    """

    token_info: Optional[TokensInfo] = field(default=None, kw_only=True)

    def select(self: WithTokensT, start: int, stop: int) -> WithTokensT:
        """The record of inputs ``start:stop``, its token record's per-input fields too."""
        cut = super().select(start, stop)
        tokens = None if self.token_info is None else self.token_info.select(start, stop)
        return dataclasses.replace(cut, token_info=tokens)

    def top_level(self) -> dict[str, object]:
        """The token record's top-level entries of ``meta`` ("mode", ...), or none without one."""
        return {} if self.token_info is None else self.token_info.top_level()

    def as_plain(self) -> dict[str, object]:
        """The record as plain data, the token record as a mapping inside it."""
        plain = super().as_plain()
        plain["token_info"] = None if self.token_info is None else self.token_info.as_plain()
        return plain

    #: the keys a stored record must hold to be read back (``from_plain``)
    required: ClassVar[frozenset[str]] = frozenset()
    #: the per-input field that names the features (a word explanation's "words", a generation's "prompt")
    labelled: ClassVar[str]

    def feature_labels(self, index: int) -> list[str]:
        """Input ``index``'s F_b feature labels, in feature order (the field ``labelled`` names).

        Args:
            index: the input.

        Returns:
            The labels; ``coef[index, :, j]`` is the weight of label j.
        """
        return list(getattr(self, self.labelled)[index])

    @classmethod
    def from_plain(cls: type[WithTokensT], plain: object) -> Optional[WithTokensT]:
        """The record from its plain data (``meta[key]`` of a loaded explanation).

        Args:
            plain: the mapping ``as_plain`` wrote.

        Returns:
            The record, or None for data of another shape (``required`` keys missing).

        Raises:
            StoredDataError: a field of another kind (a ``ValueError`` naming it, what it must be and
                what it holds).
        """
        if not cls.required or not isinstance(plain, Mapping) or not cls.required <= set(plain):
            return None
        check_record(cls, plain, f"meta['{cls.key}']")
        token_info = plain.get("token_info")
        tokens = TokensInfo.from_plain(token_info) if isinstance(token_info, Mapping) else None
        return cls._from_fields(plain, tokens)

    @classmethod
    def _from_fields(cls: type[WithTokensT], plain: Mapping[str, object], tokens: Optional[TokensInfo]) -> WithTokensT:
        """The record from checked plain data (``from_plain``): each kind lists its own fields.

        Args:
            plain: the mapping ``as_plain`` wrote, its fields checked.
            tokens: the token record read back, or None.
        """
        raise NotImplementedError
