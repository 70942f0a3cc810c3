"""Audio: LIME for spectrogram and waveform models.

``explain_spectrogram`` and ``explain_waveform`` build time-frequency features
(``segments``) and a fill, then call the engine once. Submodules: ``segments``
(grids, mel bands, superpixels), ``stft`` (the STFT plumbing of waveform explanations),
``viz`` (pictures and WAV files). The embedded SpecNet and its synthetic clips with planted
evidence are in ``torchlime.demo``.
"""

from torchlime.audio._explain import explain_spectrogram, explain_waveform
from torchlime.audio._spectrograms import SpectrogramInfo, Spectrograms
from torchlime.audio._waveforms import WaveformInfo, Waveforms

__all__ = ["explain_spectrogram", "explain_waveform", "Spectrograms", "Waveforms", "SpectrogramInfo", "WaveformInfo"]
