"""Explaining whole data sets: ``explain_dataset`` writes shards, ``load_results`` reads them.

``explain_dataset(model, data, out, modality=..., explainer=..., call=...)`` streams a ``Dataset`` or
``DataLoader`` through an explainer with a modality (``torchlime.Images(...)``, ...) and a call, as
``Explainer.run`` takes them, and writes the explanations to the folder ``out`` as safetensors shards
plus ``index.json``; it resumes after an interruption and splits the shards over the ranks of a
``torchrun`` job. ``load_results(out)`` returns a
``LazyResults`` that reads shards on access (``len``, slices, iteration by shard). ``summarize(out)``
reports the importance of every feature per class over the folder (a ``Summary``: table, JSON, bar and
beeswarm pictures) and ``pick(out, budget)`` runs SP-LIME over it.
"""

from torchlime.dataset._explain import explain_dataset
from torchlime.dataset._loaded import Results
from torchlime.dataset._lock import FolderLockedError
from torchlime.dataset._results import LazyResults, load_results
from torchlime.dataset._summarize import pick, summarize
from torchlime.dataset._summary_plots import Summary

__all__ = [
    "explain_dataset",
    "load_results",
    "LazyResults",
    "Results",
    "FolderLockedError",
    "summarize",
    "Summary",
    "pick",
]
