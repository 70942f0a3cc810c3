"""``Waveforms``: time segments or STFT cells, a fill and a blend for (B, [C,] S) audio.

Over time segments the engine perturbs the samples (with an optional crossfade at the borders);
over time-frequency cells it perturbs the complex STFT of the audio, and the model sees
``istft(masked STFT)`` inside the batched forward pass (``stft.ISTFTModel``), so a model with its own
front end (e.g. a torchaudio ``MelSpectrogram``) works unchanged.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar, Literal, Optional, cast

import torch

from torchlime._util.checks import check_choice, check_finite, check_positive_float, check_positive_int
from torchlime.audio._common import audio_fill, check_invertible, check_sample_rate
from torchlime.audio._inputs import check_audio
from torchlime.audio.segments import bin_frequencies, check_segment_counts, mel_bands
from torchlime.audio.stft import ISTFTModel, crossfade_blend, stft
from torchlime.engine import Call, Config, Info, Modality, Prepared
from torchlime.engine.info import check_record, counted, sized
from torchlime.stages.features import cell_ids, even_bands
from torchlime.typing import Model

#: what ``segments=`` of waveforms accepts: contiguous runs of samples, or cells of the STFT
WaveformSegments = Literal["time", "time_frequency"]
#: what ``freq_scale=`` accepts: the spacing of the frequency bands of STFT cells
FreqScale = Literal["linear", "mel"]


@dataclass(frozen=True, kw_only=True)
class WaveformInfo(Info):
    """What a ``Waveforms`` explanation was made of (``Explanation.info``; ``meta["audio"]`` as plain data).

    ``meta["audio"]`` shows ``segments`` under its old name ``features`` and leaves out the fields of
    the other segmentation (those that are None here).

    Attributes:
        input: "waveform".
        segments: "time" or "time_frequency".
        sample_rate: Hz of the audio.
        length: S, samples per clip.
        time_segments: slots in time.
        crossfade: seconds of crossfade at the borders ("time"; None for "time_frequency").
        freq_segments: frequency bands ("time_frequency"; else None).
        n_fft: FFT size of the STFT ("time_frequency"; else None).
        hop_length: hop of the STFT in samples ("time_frequency"; else None).
        win_length: Hann window length of the STFT ("time_frequency"; else None).
        freq_scale: "linear" or "mel" spacing of the bands ("time_frequency"; else None).
    """

    key: ClassVar[str] = "audio"

    input: Literal["waveform"] = "waveform"
    segments: WaveformSegments
    sample_rate: float
    length: int
    time_segments: int
    crossfade: Optional[float] = None
    freq_segments: Optional[int] = None
    n_fft: Optional[int] = None
    hop_length: Optional[int] = None
    win_length: Optional[int] = None
    freq_scale: Optional[str] = None

    def describe(self, count: int, shape: tuple[int, ...]) -> str:
        """The clips by their samples (over STFT cells, the STFT's grid besides), e.g. for the summaries.

        Args:
            count: B, the clips.
            shape: the explanation's ``input_shape``: ([C,] S) over time, ([C,] Fr, Tm) over STFT cells.

        Returns:
            e.g. "1 waveform of 16000 samples (a 257 x 126 spectrogram)", "2 waveforms of 800 samples each".
        """
        grid = self.segments == "time_frequency"
        channels = shape[:-2] if grid else shape[:-1]
        notes = [counted(channels[0], "channel")] if channels and channels[0] > 1 else []
        if grid:
            cells = " x ".join(map(str, shape[-2:]))
            notes.append(f"a {cells} spectrogram" if count == 1 else f"{cells} spectrograms")
        said = sized("waveform", [self.length] * count, "sample")
        return f"{said} ({', '.join(notes)})" if notes else said

    @classmethod
    def from_plain(cls, plain: object) -> Optional[WaveformInfo]:
        """The record from ``meta["audio"]`` of a loaded waveform explanation (``as_plain``'s view), else None.

        Raises:
            StoredDataError: a field of another kind (a ``ValueError`` naming it).
        """
        if not isinstance(plain, Mapping) or plain.get("input") != "waveform":
            return None
        fields = {("segments" if k == "features" else k): v for k, v in plain.items()}
        if not {f.name for f in dataclasses.fields(cls) if f.default is dataclasses.MISSING} <= set(fields):
            return None
        if not set(fields) <= {f.name for f in dataclasses.fields(cls)}:
            return None
        check_record(cls, fields, "meta['audio']")
        return cls(**fields)

    def as_plain(self) -> dict[str, object]:
        """The record as ``meta["audio"]`` has always shown it: ``segments`` as ``features``, no None fields.

        Returns:
            The plain dict.
        """
        return {("features" if k == "segments" else k): v for k, v in super().as_plain().items() if v is not None}


@dataclass(frozen=True)
class Waveforms(Modality):
    """Raw audio (B, S) or (B, C, S) over time segments or time-frequency cells.

    Hidden segments take the configuration's fill (silence unless a fill or a preset with one is
    given), computed on the waveform for "time" and on the complex STFT for "time_frequency". The
    modality sets ``perturb_fn`` itself (the crossfade), so its front door does not offer it.

    Attributes:
        sample_rate: Hz of the audio; if the model (or a submodule) has a ``sample_rate`` attribute,
            it must be this.
        segments: "time" (contiguous runs of samples) or "time_frequency" (cells of the STFT).
        time_segments: slots in time (default 10 for "time", 5 for "time_frequency").
        freq_segments: frequency bands for "time_frequency".
        n_fft: FFT size of the Hann-window STFT of "time_frequency"; the model sees
            ``istft(masked STFT)`` of length S.
        hop_length: hop of that STFT in samples (default n_fft // 4).
        win_length: Hann window length of that STFT (default n_fft).
        freq_scale: "linear" or "mel" spacing of the frequency bands.
        crossfade: seconds of linear crossfade at segment borders ("time" only; 0 = hard cuts).
    """

    owns: ClassVar[frozenset[str]] = frozenset({"perturb_fn"})

    sample_rate: float
    segments: WaveformSegments = "time"
    time_segments: Optional[int] = None
    freq_segments: int = 4
    n_fft: int = 512
    hop_length: Optional[int] = None
    win_length: Optional[int] = None
    freq_scale: FreqScale = "linear"
    crossfade: float = 0.0

    def prepare(self, model: Model, inputs: torch.Tensor, how: Config, call: Call) -> Prepared:
        """Check the audio and the settings, build the time segments or the STFT cells, the fill and the blend.

        Args:
            model: the caller's model (its ``sample_rate``, if any, must be ``self.sample_rate``).
            inputs: real (B, S) or (B, C, S) audio.
            how: the caller's configuration; its fill becomes the audio one.
            call: the caller's call; over time with a crossfade, its ``perturb_fn`` is the crossfade.

        Returns:
            The ``Prepared`` call, with a ``WaveformInfo``: over time, the audio and a (1 or B, [1,] S)
            map; over time-frequency cells, the complex STFT, its (1, [1,] Fr, Tm) grid and the
            inverse STFT before the model.

        Raises:
            ValueError / TypeError: wrong dimensions (one clip without its batch dimension,
                channels last: (B, S, C)), integer audio (int16 PCM: ``waves.float() / 32768``),
                non-finite audio, audio shorter than the STFT or than the number of segments, STFT
                settings ``torch.istft`` cannot invert, an input-space kernel on STFT cells, a
                sample rate that disagrees with the model's, a crossfade with a ``perturb_fn``.
        """
        check_audio(inputs, "waves", (2, 3), "(B, S) or (B, C, S)")
        sample_rate = cast(float, check_sample_rate(model, check_positive_float(self.sample_rate, "sample_rate")))
        segments = check_choice(self.segments, "segments", ("time", "time_frequency"))
        check_choice(self.freq_scale, "freq_scale", ("linear", "mel"))
        crossfade = check_positive_float(self.crossfade, "crossfade", allow_zero=True)
        how = dataclasses.replace(how, baseline=audio_fill(how.baseline, how.preset))
        if segments == "time":
            return self._over_time(inputs, how, call, sample_rate, crossfade)
        return self._over_cells(inputs, how, call, sample_rate, crossfade)

    def _over_time(
        self, waves: torch.Tensor, how: Config, call: Call, sample_rate: float, crossfade: float
    ) -> Prepared:
        """The hand-over of ``segments="time"``: even runs of samples, crossfaded when asked."""
        n_samp = waves.shape[-1]
        time_segments = check_positive_int(10 if self.time_segments is None else self.time_segments, "time_segments")
        if n_samp < time_segments:
            raise ValueError(f"`waves` has {n_samp} samples, too short for time_segments={time_segments}")
        fade = int(round(crossfade * sample_rate))
        if fade and 2 * fade >= n_samp // time_segments:
            raise ValueError(
                f"`crossfade` ({crossfade} s = {fade} samples) must be shorter than half a "
                f"segment ({n_samp // time_segments} samples)"
            )
        if fade:
            if call.perturb_fn is not None:
                raise ValueError(
                    "`perturb_fn` must be None with a `crossfade` (the crossfade is the perturbation), got "
                    f"{call.perturb_fn!r}; pass one of them"
                )
            call = dataclasses.replace(call, perturb_fn=crossfade_blend(fade))
        lead = (1,) * (waves.ndim - 1)
        features = even_bands(n_samp, time_segments, waves.device).view(*lead, n_samp)
        info = WaveformInfo(
            segments="time",
            sample_rate=sample_rate,
            length=n_samp,
            time_segments=time_segments,
            crossfade=crossfade,
        )
        return Prepared(waves, features, how, call, scope="audio", input_name="waves", info=info)

    def _over_cells(
        self, waves: torch.Tensor, how: Config, call: Call, sample_rate: float, crossfade: float
    ) -> Prepared:
        """The hand-over of ``segments="time_frequency"``: the STFT, its cells and the inverse STFT adapter."""
        n_samp = waves.shape[-1]
        time_segments = check_positive_int(5 if self.time_segments is None else self.time_segments, "time_segments")
        n_fft = check_positive_int(self.n_fft, "n_fft", minimum=2)
        hop = check_positive_int(self.hop_length if self.hop_length is not None else max(1, n_fft // 4), "hop_length")
        win = check_positive_int(self.win_length if self.win_length is not None else n_fft, "win_length")
        if win > n_fft:
            raise ValueError(f"`win_length` must be <= n_fft ({n_fft}), got {win}")
        if hop > win:
            raise ValueError(
                f"`hop_length` must be <= win_length ({win}) for the STFT of segments='time_frequency' "
                f"(frames must overlap for torch.istft to rebuild the audio), got {hop}"
            )
        if n_samp < n_fft:
            raise ValueError(
                f"`waves` has {n_samp} samples, too short for the STFT with n_fft={n_fft}; "
                f"pass a smaller `n_fft` or longer audio"
            )
        if crossfade:
            raise ValueError("`crossfade` applies to segments='time' only (STFT cells overlap-add smoothly)")
        how.refuse_input_kernel("audio", "would compare the complex STFTs of segments='time_frequency'")
        check_finite(waves, "waves")  # the engine checks the STFT, not the audio itself
        spec = stft(waves, n_fft, hop, win)  # (B, [C,] Fr, Tm) complex
        check_invertible(spec, n_fft, hop, win, n_samp)
        n_freq, n_frames = spec.shape[-2:]
        check_segment_counts(n_freq, n_frames, self.freq_segments, time_segments, what="the STFT of `waves`")
        bands = (
            mel_bands(bin_frequencies(n_freq, sample_rate, n_fft, waves.device), self.freq_segments)
            if self.freq_scale == "mel"
            else None
        )
        cells = cell_ids(
            (n_freq, n_frames), (self.freq_segments, time_segments), bands=(bands, None), device=waves.device
        )
        features = cells.view(*(1,) * (waves.ndim - 1), n_freq, n_frames)
        adapter = functools.partial(
            ISTFTModel, n_fft=n_fft, hop_length=hop, win_length=win, length=n_samp, reference=waves
        )
        info = WaveformInfo(
            segments="time_frequency",
            sample_rate=sample_rate,
            length=n_samp,
            time_segments=time_segments,
            freq_segments=self.freq_segments,
            n_fft=n_fft,
            hop_length=hop,
            win_length=win,
            freq_scale=self.freq_scale,
        )
        return Prepared(spec, features, how, call, adapter, "audio", "waves", info)
