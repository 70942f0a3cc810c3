"""``Spectrograms``: time-frequency segments and a fill for (B, [C,] Fr, Tm) spectrograms."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar, Literal, Optional, Sequence, Union

import torch

from torchlime._util.checks import check_positive_int, from_numpy
from torchlime.audio._common import audio_fill, check_sample_rate
from torchlime.audio._inputs import check_audio
from torchlime.audio.segments import SegmentSpec, spectrogram_segments, warn_bins
from torchlime.engine import Call, Config, Info, Modality, Prepared
from torchlime.engine.info import Previewed, check_record, counted
from torchlime.typing import Model


@dataclass(frozen=True, kw_only=True)
class SpectrogramInfo(Previewed):
    """What a ``Spectrograms`` explanation was made of (``Explanation.info``; ``meta["audio"]`` as plain data).

    Attributes:
        input: "spectrogram".
        segments: the segmentation's name ("grid", "time", "freq", "mel", "slic"), or "explicit"
            for a map or a callable.
        time_segments: time slots of the grids.
        freq_segments: frequency bands of the grids.
        sample_rate: Hz of the audio behind the spectrograms, or None.
        hop_length: the spectrograms' STFT hop in samples, or None.
        n_fft: the spectrograms' STFT size, or None.
        fmin: lowest frequency (Hz) of the mel bands.
        fmax: highest frequency (Hz) of the mel bands, or None (the highest bin).
        bin_freqs: the (Fr,) bin frequencies in Hz the caller gave, or None.
        previews: (read-only property) uint8 (B, 3, h, w) small grey pictures of the spectrograms
            (``picture``), which the notebook display draws the weights over; left out of ``meta["audio"]``
            and of saved files.
        preview_source: the same pictures, as the call kept them (``engine.info.Previewed``), or None.
    """

    key: ClassVar[str] = "audio"

    input: Literal["spectrogram"] = "spectrogram"
    segments: str
    time_segments: int
    freq_segments: int
    sample_rate: Optional[float]
    hop_length: Optional[int]
    n_fft: Optional[int]
    fmin: float
    fmax: Optional[float]
    bin_freqs: Optional[tuple[float, ...]]
    preview_source: Optional[torch.Tensor] = dataclasses.field(default=None, compare=False, repr=False)

    @classmethod
    def from_plain(cls, plain: object) -> Optional[SpectrogramInfo]:
        """The record from ``meta["audio"]`` of a loaded spectrogram explanation, else None.

        Raises:
            StoredDataError: a field of another kind (a ``ValueError`` naming it).
        """
        names = {f.name for f in dataclasses.fields(cls) if f.name not in cls.transient}
        if not isinstance(plain, Mapping) or plain.get("input") != "spectrogram" or set(plain) != names:
            return None
        check_record(cls, plain, "meta['audio']")
        freqs = plain["bin_freqs"]
        return cls(**{**plain, "bin_freqs": None if freqs is None else tuple(freqs)})

    def describe(self, count: int, shape: tuple[int, ...]) -> str:
        """The spectrograms by their frequency bins and frames, e.g. for the summaries.

        Args:
            count: B, the spectrograms.
            shape: the explanation's ``input_shape``, ([C,] Fr, Tm).

        Returns:
            e.g. "2 spectrograms of 64 frequency bins x 40 frames (2 channels)".
        """
        bins, frames = counted(shape[-2], "frequency bin"), counted(shape[-1], "frame")
        said = f"{counted(count, 'spectrogram')} of {bins} x {frames}"
        return f"{said} ({counted(shape[0], 'channel')})" if len(shape) == 3 and shape[0] > 1 else said

    @staticmethod
    def picture(specs: torch.Tensor) -> torch.Tensor:
        """Small grey pictures of spectrograms (rows: frequency bins), on their device, without a host sync.

        Non-negative spectrograms (power or magnitude) are drawn on a log scale (``10 log10``, the top
        80 dB), others (already in dB) as they are; each is then stretched to black..white
        (``Info.thumbnails``).

        Args:
            specs: (B, Fr, Tm) or (B, C, Fr, Tm) real spectrograms.

        Returns:
            uint8 (B, 3, h, w), the longer side at most ``engine.info.PREVIEW_SIDE``.
        """
        x = specs.detach().float().nan_to_num()
        x = x.unsqueeze(1) if x.dim() == 3 else x.mean(1, keepdim=True)
        top = x.amax(dim=(1, 2, 3), keepdim=True)
        power = (x.amin(dim=(1, 2, 3), keepdim=True) >= 0) & (top > 0)
        decibels = 10 * torch.log10(x.clamp_min(0) + top.clamp_min(torch.finfo(x.dtype).tiny) * 1e-8)
        return Info.thumbnails(torch.where(power, decibels, x))


@dataclass(frozen=True)
class Spectrograms(Modality):
    """Spectrograms (B, Fr, Tm) or (B, C, Fr, Tm) (rows: frequency, columns: frames) over time-frequency segments.

    Hidden segments take the configuration's fill: silence ("zero") unless a fill or a preset with
    one is given; ``baseline="blur"`` is a light blur (``BLUR_SIGMA`` bins and frames).

    Attributes:
        segments: "grid" (time x frequency, default 5 x 4 as in SLIME / the veracity study), "time",
            "freq", "mel" (bands equally spaced on the mel scale), "slic" (superpixels), an integer
            map (Fr, Tm) / (B or 1, [1 or C,] Fr, Tm) or a callable specs -> map.
        time_segments: time slots of the grids ("grid", "time", "mel").
        freq_segments: frequency bands of the grids ("grid", "freq", "mel").
        sample_rate: Hz of the audio behind the spectrograms (for "mel", the plots and the check
            against ``model.sample_rate``).
        hop_length: the spectrograms' STFT hop in samples (recorded for the plots).
        n_fft: the spectrograms' STFT size (for "mel" and the plots: the bins' frequencies, those of
            a linear STFT of ``n_fft // 2 + 1`` bins; warns when Fr differs).
        bin_freqs: (Fr,) bin frequencies in Hz (e.g. a mel spectrogram's centres:
            ``segments.mel_frequencies(Fr, sample_rate)``).
        fmin: lowest frequency (Hz) of the mel bands.
        fmax: highest frequency (Hz) of the mel bands (default: the highest bin).
        n_segments: SLIC superpixels (defaults to time x freq segments).
        compactness: SLIC compactness.
    """

    segments: SegmentSpec = "grid"
    time_segments: int = 5
    freq_segments: int = 4
    sample_rate: Optional[float] = None
    hop_length: Optional[int] = None
    n_fft: Optional[int] = None
    bin_freqs: Optional[Union[Sequence[float], torch.Tensor]] = None
    fmin: float = 0.0
    fmax: Optional[float] = None
    n_segments: Optional[int] = None
    compactness: float = 0.1

    def prepare(self, model: Model, inputs: torch.Tensor, how: Config, call: Call) -> Prepared:
        """Check the spectrograms and the settings, segment the time-frequency plane, set the audio fill.

        Args:
            model: the caller's model (its ``sample_rate``, if any, must be ``self.sample_rate``).
            inputs: real (B, Fr, Tm) or (B, C, Fr, Tm) spectrograms.
            how: the caller's configuration; its fill becomes the audio one.
            call: the caller's call (unchanged).

        Returns:
            The ``Prepared`` call, with a ``SpectrogramInfo``.

        Raises:
            ValueError / TypeError: wrong dimensions (one clip without its batch dimension),
                integer or complex spectrograms, more segments than frames or bins, a sample rate
                that is not positive or disagrees with the model's. Warns (``UserWarning``) when
                Fr is not ``n_fft // 2 + 1``.
        """
        segments = from_numpy(self.segments)  # numpy arrays in, as at every door
        check_audio(inputs, "specs", (3, 4), "(B, Fr, Tm) or (B, C, Fr, Tm)")
        sample_rate = check_sample_rate(model, self.sample_rate)
        n_fft = self.n_fft
        if n_fft is not None:
            n_fft = check_positive_int(n_fft, "n_fft", minimum=2)
            if self.bin_freqs is None:
                warn_bins(inputs.shape[-2], n_fft)
        hop_length = None if self.hop_length is None else check_positive_int(self.hop_length, "hop_length")
        features = spectrogram_segments(
            inputs,
            segments,
            time_segments=self.time_segments,
            freq_segments=self.freq_segments,
            sample_rate=sample_rate,
            n_fft=n_fft,
            bin_freqs=self.bin_freqs,
            fmin=self.fmin,
            fmax=self.fmax,
            n_segments=self.n_segments,
            compactness=self.compactness,
        )
        how = dataclasses.replace(how, baseline=audio_fill(how.baseline, how.preset))
        bins = None if self.bin_freqs is None else tuple(float(f) for f in torch.as_tensor(self.bin_freqs).tolist())
        info = SpectrogramInfo(
            segments=segments if isinstance(segments, str) else "explicit",
            time_segments=self.time_segments,
            freq_segments=self.freq_segments,
            sample_rate=sample_rate,
            hop_length=hop_length,
            n_fft=n_fft,
            fmin=self.fmin,
            fmax=self.fmax,
            bin_freqs=bins,
            preview_source=SpectrogramInfo.picture(inputs),
        )
        return Prepared(inputs, features, how, call, scope="audio", input_name="specs", info=info)
