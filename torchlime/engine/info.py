"""Typed records that explanations carry besides their tensors: what a modality built (``Info``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar, Optional, Union

import torch

from torchlime._util.records import PerInput
from torchlime.engine._stored import StoredDataError
from torchlime.engine._stored import check_record as check_record  # what a modality's record checks on load

#: the longest side of the pictures records keep of their inputs (``Info.thumbnails``), in pixels
PREVIEW_SIDE = 96
#: the record kinds of every ``key`` (two kinds may share one: spectrograms and waveforms), for files (``rebuild``)
_KINDS: dict[str, list[type[Info]]] = {}


@dataclass(frozen=True)
class Info(PerInput):
    """Base of a modality's record on its explanations (``Explanation.info``).

    A subclass is a frozen dataclass of plain values, tensors and lists; ``per_input`` names the
    fields that hold one entry per input, so that ``Explanation[i]`` keeps the right ones.
    ``key`` is the name under which ``Explanation.meta`` shows the record as plain data; the fields
    that ``transient`` names, and those whose names start with "_", stay out of that plain view (what
    files store); ``top_level`` gives what ``meta`` also shows at its top level. The notebook display
    (``engine.notebook``) reads a record only through its hooks: ``feature_labels``, ``target_labels``,
    ``text_pieces`` and ``preview``.
    """

    key: ClassVar[str] = "info"

    def __init_subclass__(cls, **kwargs: object) -> None:
        """Register a kind that names its own ``key``."""
        super().__init_subclass__(**kwargs)
        if "key" in cls.__dict__:
            _KINDS.setdefault(cls.key, []).append(cls)

    @classmethod
    def from_plain(cls, plain: object) -> Optional[Info]:
        """The record from the plain data ``as_plain`` wrote, or None where a kind cannot rebuild it.

        Args:
            plain: ``meta[key]`` of an explanation read back from a file.

        Returns:
            None here; kinds whose records files must keep (e.g. the tabular bins) override it.
        """
        return None

    def top_level(self) -> dict[str, object]:
        """Entries ``Explanation.meta`` shows at its top level besides ``meta[key]``, as plain data.

        Returns:
            Name -> plain value (a word explanation's "words", a token explanation's "mode"): the
            entries earlier versions wrote there; none here.
        """
        return {}

    def feature_labels(self, index: int) -> Optional[list[str]]:
        """The names of input ``index``'s features (its words, a table row's conditions), where the kind has them.

        Args:
            index: the input.

        Returns:
            One name per feature, or None (the pictures then say "feature j").
        """
        return None

    def describe(self, count: int, shape: tuple[int, ...]) -> Optional[str]:
        """The explained inputs in the modality's words, for the summaries (``describe_inputs``).

        Args:
            count: B, the explained inputs.
            shape: the explanation's ``input_shape`` (what the features were laid on: for a waveform
                explained over STFT cells, the STFT's).

        Returns:
            e.g. "2 texts of 9 and 7 words", "1 waveform of 16000 samples (a 257 x 126 spectrogram)";
            None here (the summaries then say "B input(s) of shape ...").
        """
        return None

    def target_labels(self, index: int) -> Optional[list[str]]:
        """The names of input ``index``'s T targets, where the kind names them (a generated text's tokens).

        A record that names its targets is shown as a table: one row per target, one column per feature
        (``feature_labels``).

        Args:
            index: the input.

        Returns:
            One name per target (column of ``Explanation.coef``), or None (the pictures then say "target t").
        """
        return None

    def text_pieces(self, index: int) -> Optional[tuple[list[str], list[int]]]:
        """Input ``index`` as running text: its pieces and each piece's feature (-1: never hidden).

        Args:
            index: the input.

        Returns:
            ``(pieces, piece_features)`` for explanations of raw text, else None.
        """
        return None

    def preview(self, index: int) -> Optional[torch.Tensor]:
        """A small picture of input ``index`` for the notebook display to draw its weights over.

        Kinds that keep one (images, spectrograms) hold them in a per-input, ``transient`` field
        ``previews``, uint8 (B, 3, h, w) made by ``thumbnails``, which files do not store.

        Args:
            index: the input.

        Returns:
            uint8 (h, w, 3) RGB on the CPU, or None where the kind keeps no picture.
        """
        kept = pictures(getattr(self, "previews", None))
        if kept is None or not 0 <= index < kept.shape[0]:
            return None
        return kept[index].permute(1, 2, 0).to("cpu")

    @staticmethod
    def thumbnails(images: torch.Tensor, side: int = PREVIEW_SIDE) -> torch.Tensor:
        """Small RGB copies of images for ``preview``, made on their device without a host sync.

        An image within [0, 1] is kept as it is, any other is min-max scaled to [0, 1] (over all its
        channels at once); one channel is drawn grey, three as RGB, any other count as the grey of their
        mean. Images larger than ``side`` are shrunk (bilinear, antialiased) so that their longer side is
        ``side``.

        Args:
            images: real (B, C, H, W).
            side: the longest side kept, in pixels.

        Returns:
            uint8 (B, 3, h, w) on the images' device, max(h, w) <= max(side, 1) unless H, W are smaller.

        Example:
            >>> Info.thumbnails(torch.rand(2, 1, 300, 150)).shape
            torch.Size([2, 3, 96, 48])
        """
        x = images.detach().float().nan_to_num()
        if x.shape[1] != 3:
            x = x.mean(1, keepdim=True).expand(-1, 3, -1, -1)
        low = x.amin(dim=(1, 2, 3), keepdim=True)
        high = x.amax(dim=(1, 2, 3), keepdim=True)
        stretched = (x - low) / (high - low).clamp_min(torch.finfo(x.dtype).tiny)
        x = torch.where((low >= 0) & (high <= 1), x, stretched)
        h, w = x.shape[-2:]
        if max(h, w) > side:
            shrink = max(side, 1) / max(h, w)
            size = (max(1, round(h * shrink)), max(1, round(w * shrink)))
            x = torch.nn.functional.interpolate(x, size=size, mode="bilinear", antialias=True, align_corners=False)
        return (x.clamp(0, 1) * 255).round().to(torch.uint8)

    @staticmethod
    def lazy_thumbnails(images: torch.Tensor, side: int = PREVIEW_SIDE) -> Union[Thumbnails, torch.Tensor]:
        """``thumbnails`` of images, made when first read: no operator in the call that keeps them.

        Args:
            images: real (B, C, H, W), held (not copied) until the pictures are first read.
            side: the longest side kept, in pixels.

        Returns:
            A ``Thumbnails`` (uint8 (B, 3, h, w) on first read), or the pictures themselves for an inference
            tensor (it has no version counter that would tell a later write).
        """
        return Info.thumbnails(images, side) if images.is_inference() else Thumbnails(images, side)

    def as_plain(self) -> dict[str, object]:
        """The record as plain data (tensors become lists): what ``meta[key]`` shows and files store.

        Returns:
            Field name -> plain value, for every field but the ``transient`` ones and those named "_...".
        """
        kept = [f.name for f in dataclasses.fields(self) if not f.name.startswith("_") and f.name not in self.transient]
        return {name: _plain(getattr(self, name)) for name in kept}


class Thumbnails:
    """``Info.thumbnails`` of images, made on first read (``get``) from the images the call already held.

    A record keeps them so, in place of the uint8 (B, 3, h, w) tensor: the call pays no operator for
    pictures that only a notebook display reads. The images are held, not copied; a write into them
    after the call (their ``_version`` moved) is seen, and the pictures are then None rather than
    pictures of other images. ``thumbnails(images)[a:b]`` equals ``thumbnails(images[a:b])`` bit for bit
    (each image is scaled and shrunk on its own), so slices stay lazy too.

    Args:
        images: real (B, C, H, W) images (not an inference tensor).
        side: the longest side kept, in pixels.
        version: the images' ``_version`` when the call held them (default: now).
    """

    def __init__(self, images: torch.Tensor, side: int = PREVIEW_SIDE, version: Optional[int] = None) -> None:
        self.images: Optional[torch.Tensor] = images.detach()
        self.side = side
        self.version = images._version if version is None else version
        self._made: Optional[torch.Tensor] = None

    def __getitem__(self, index: slice) -> Union[Thumbnails, torch.Tensor, None]:
        """The pictures of images ``index`` (a slice of the batch), still lazy unless made already."""
        if self._made is not None or self.images is None:
            return None if self._made is None else self._made[index]
        return Thumbnails(self.images[index], self.side, self.version)  # a view shares the version counter

    def get(self) -> Optional[torch.Tensor]:
        """Uint8 (B, 3, h, w): the pictures, made once (the images let go), or None if they were written since."""
        if self._made is None and self.images is not None:
            if self.images._version == self.version:
                self._made = Info.thumbnails(self.images, self.side)
            self.images = None  # made, or never to be made: the images are not held any longer
        return self._made


def pictures(value: object) -> Optional[torch.Tensor]:
    """A record's kept pictures: the tensor itself, or a ``Thumbnails``' (made now), else None."""
    if isinstance(value, Thumbnails):
        return value.get()
    return value if isinstance(value, torch.Tensor) else None


def _plain(value: object) -> object:
    """Tensors (at any depth of lists, tuples and dicts) as nested lists."""
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().tolist()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def rebuild(meta: Mapping[str, object]) -> Optional[Info]:
    """The typed record of an explanation read back from a file, from its plain ``meta``.

    Args:
        meta: the explanation's ``meta``.

    Returns:
        The record of the first registered kind whose key ``meta`` holds and that can rebuild it, else None
        (``Explanation.load`` keeps such plain data in ``Explanation.stored``).

    Raises:
        StoredDataError: a record's field holds data of another kind than the record's (a ``ValueError``).
    """
    for key, kinds in _KINDS.items():
        for kind in kinds if key in meta else []:
            try:
                record = kind.from_plain(meta[key])
            except StoredDataError:  # a field of the wrong kind: refused, never shown untyped
                raise
            except (TypeError, ValueError):  # plain data of another version: the record stays untyped
                record = None
            if record is not None:
                return record
    return None


def describe_inputs(count: int, shape: tuple[int, ...], info: Optional[Info]) -> str:
    """What an explanation explained, as ``print(explanation)`` and the notebook summary say it.

    Args:
        count: B, the explained inputs.
        shape: the explanation's ``input_shape``.
        info: its record, whose ``describe`` speaks the modality's words (words, tokens, samples).

    Returns:
        e.g. "2 texts of 9 and 7 words", else "B input(s) of shape (...)".

    Example:
        >>> describe_inputs(2, (3, 8, 8), None)
        '2 input(s) of shape (3, 8, 8)'
    """
    said = None if info is None else info.describe(count, tuple(shape))
    return said if said is not None else f"{count} input(s) of shape {tuple(shape)}"


def counted(n: int, noun: str, plural: Optional[str] = None) -> str:
    """``n`` and ``noun``, plural unless n is 1: "1 text", "2 texts".

    Args:
        n: how many.
        noun: the singular.
        plural: the plural (default: ``noun + "s"``).

    Returns:
        The phrase.
    """
    return f"{n} {noun if n == 1 else (plural or noun + 's')}"


def lengths(sizes: list[int], unit: str) -> str:
    """Lengths in one phrase: "9 and 7 words", "9 words each", more than four different ones as a range.

    Args:
        sizes: each input's length, in ``unit``.
        unit: the singular of the unit ("word", "token", "sample").

    Returns:
        "9 words", "9, 7 and 5 words", "9 words each" (several of one length), "3 to 12 words" (more than
        four different lengths).

    Example:
        >>> lengths([9, 7], "word"), lengths([4, 4], "token"), lengths([1], "sample")
        ('9 and 7 words', '4 tokens each', '1 sample')
    """
    if len(set(sizes)) <= 1:
        return counted(sizes[0] if sizes else 0, unit) + (" each" if len(sizes) > 1 else "")
    if len(sizes) > 4:
        return f"{min(sizes)} to {max(sizes)} {unit}s"
    return f"{', '.join(map(str, sizes[:-1]))} and {sizes[-1]} {unit}s"


def sized(things: str, sizes: list[int], unit: str) -> str:
    """Inputs and their lengths in one phrase: "2 texts of 9 and 7 words".

    Args:
        things: the singular of the inputs ("text", "waveform").
        sizes: each input's length, in ``unit`` (``lengths``).
        unit: the singular of the unit ("word", "token", "sample").

    Returns:
        e.g. "1 text of 9 words", "2 waveforms of 16000 samples each".

    Example:
        >>> sized("text", [9, 7], "word"), sized("waveform", [16000], "sample")
        ('2 texts of 9 and 7 words', '1 waveform of 16000 samples')
    """
    return f"{counted(len(sizes), things)} of {lengths(sizes, unit)}"


@dataclass(frozen=True)
class Previewed(Info):
    """Base of the records that keep small pictures of their inputs for ``Info.preview`` (images, spectrograms).

    Their field ``preview_source`` holds the pictures as the call kept them: uint8 (B, 3, h, w), a
    ``Thumbnails`` made on first read, or None; in memory only (out of ``meta`` and of files).
    ``previews`` reads them. A subclass declares the field itself, last (it has a default):
    ``preview_source: Union[Thumbnails, torch.Tensor, None] = dataclasses.field(default=None, compare=False,
    repr=False)``.
    """

    per_input: ClassVar[tuple[str, ...]] = ("preview_source",)
    transient: ClassVar[tuple[str, ...]] = ("preview_source",)

    @property
    def previews(self) -> Optional[torch.Tensor]:
        """Uint8 (B, 3, h, w) one picture per input (made on first read where the call deferred it), or None."""
        return pictures(getattr(self, "preview_source", None))
