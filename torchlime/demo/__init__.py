"""Demo data and models: synthetic inputs with a planted ground truth and small classifiers trained on them.

Each modality has a data module, whose generators are seeded and know which part of every input decides
its label, and a models module, with a small classifier whose weights ship in ``weights/``:

* images: ``image_data`` (shapes among distractors, ``make_images``), ``image_models`` (``DemoNet``,
  ``load_demo_model``) and ``image_vit`` (a small vision transformer, ``load_demo_vit``: needs torchvision);
* audio: ``audio_data`` (a voice-like tone among tones and chirps, ``make_clips``, ``log_spectrogram``)
  and ``audio_models`` (``SpecNet``, ``WaveformClassifier``, ``load_audio_model``);
* text: ``text_data`` (sentiment phrases among neutral words, ``make_text_dataset``) and ``text_models``
  (``TextCNN``, ``load_text_model``, and ``BigramMLM``, a masked LM for infilling);
* ``run``: the ``torchlime demo`` job (``run_demo``), which explains held-out images and scores the
  explanations against the planted objects.
"""

from torchlime.demo.audio_data import log_spectrogram, make_clips
from torchlime.demo.audio_models import SpecNet, WaveformClassifier, load_audio_model
from torchlime.demo.image_data import make_images, make_scenes
from torchlime.demo.image_models import DemoNet, load_demo_model
from torchlime.demo.image_vit import load_demo_vit
from torchlime.demo.run import chosen_pixels, coverage, hits, run_demo
from torchlime.demo.text_data import make_text_dataset
from torchlime.demo.text_models import BigramMLM, TextCNN, load_text_model

__all__ = [
    "make_images",
    "make_scenes",
    "DemoNet",
    "load_demo_model",
    "load_demo_vit",
    "make_clips",
    "log_spectrogram",
    "SpecNet",
    "WaveformClassifier",
    "load_audio_model",
    "make_text_dataset",
    "TextCNN",
    "BigramMLM",
    "load_text_model",
    "run_demo",
    "coverage",
    "hits",
    "chosen_pixels",
]
