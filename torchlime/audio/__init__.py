"""Audio: LIME for spectrogram and waveform models.

``explain_spectrogram`` and ``explain_waveform`` build time-frequency features
(``segments``) and a fill, then call the engine once. Submodules: ``segments``
(grids, mel bands, superpixels), ``stft`` (the STFT plumbing of waveform explanations),
``viz`` (pictures and WAV files), ``data`` and ``models`` (the embedded SpecNet and its
synthetic clips with planted evidence).
"""

from torchlime.audio._explain import explain_spectrogram, explain_waveform

__all__ = ["explain_spectrogram", "explain_waveform"]
