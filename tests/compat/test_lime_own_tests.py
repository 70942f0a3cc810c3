"""lime's own tests of the names the compat layer offers, run against ``torchlime.compat.lime``.

lime's wheel ships its tests (``lime/tests``). They are loaded from there, unchanged, while
``sys.modules`` maps ``lime``, ``lime.discretize``, ``lime.lime_text``, ``lime.lime_tabular``,
``lime.lime_image``, ``lime.explanation``, ``lime.wrappers`` and ``lime.wrappers.scikit_image`` to
the compat layer's modules (the ``lime_shim`` fixture installs the entries and restores the
previous ones afterwards); each case runs as a ``unittest`` case and must succeed.

Cases that pass:

- test_discretize: ``test_random_state``, ``test_feature_names_1`` (quartile), ``test_feature_names_2``
  (decile), ``test_feature_names_3`` (entropy).
- test_lime_text: ``test_indexed_characters_bow``, ``test_indexed_characters_not_bow``,
  ``test_indexed_string_inverse_removing_tokenizer``, ``test_indexed_string_inverse_removing_regex``.
- test_lime_tabular: ``test_lime_explainer_good_regressor``, ``test_lime_explainer_good_regressor_synthetic_data``,
  ``test_lime_explainer_sparse_synthetic_data``, ``test_lime_explainer_no_regressor``,
  ``test_lime_explainer_entropy_discretizer``, ``test_lime_tabular_explainer_equal_random_state``,
  ``test_lime_tabular_explainer_not_equal_random_state``, ``testFeatureNamesAndCategoricalFeats``,
  ``testFeatureValues``, ``test_lime_explainer_with_data_stats``.
- test_scikit_image: ``test_base_wrapper``, ``test__check_params``, ``test_set_params``,
  ``test_filter_params``, ``test_instanciate_slic``, ``test_instanciate_felzenszwalb`` (both empty in lime).

Cases skipped, and why:

- test_lime_text: ``test_lime_text_explainer_good_regressor``, ``test_lime_text_tabular_equal_random_state``,
  ``test_lime_text_tabular_not_equal_random_state``: they download the 20 newsgroups data set
  (``fetch_20newsgroups``).
- test_lime_text: ``test_indexed_string_regex``, ``test_indexed_string_callable`` when numpy cannot
  compare ragged lists (numpy >= 1.24: ``np.array_equal`` of ``[[0, 8], [2], ...]`` is False, and
  lime itself fails them); ``test_indexed_string_positions_as_lime_expects`` below checks the same
  values with ``==``.
- test_scikit_image: ``test_instanciate_segmentation_algorithm`` when the installed scikit-image's
  ``quickshift`` no longer takes ``random_seed`` (renamed ``rng``): the case calls scikit-image with it
  directly. ``test_segmentation_algorithm_matches_quickshift`` below checks the same with ``rng``.
- test_generic_utils (not loaded): it tests ``lime.utils.generic_utils.has_arg``, which the compat layer does
  not offer.
"""

from __future__ import annotations

import importlib.util
import inspect
import sys
import unittest
from pathlib import Path
from types import ModuleType
from typing import Iterator, Optional

import numpy as np
import pytest

lime = pytest.importorskip("lime")
pytest.importorskip("sklearn")

import torchlime.compat.lime as compat  # noqa: E402
from torchlime.compat.lime import discretize, explanation, lime_image, lime_tabular, lime_text, wrappers  # noqa: E402
from torchlime.compat.lime.wrappers import scikit_image  # noqa: E402

TESTS = Path(lime.__file__).parent / "tests"
SHIM: dict[str, ModuleType] = {
    "lime": compat,
    "lime.discretize": discretize,
    "lime.lime_text": lime_text,
    "lime.lime_tabular": lime_tabular,
    "lime.lime_image": lime_image,
    "lime.explanation": explanation,
    "lime.wrappers": wrappers,
    "lime.wrappers.scikit_image": scikit_image,
}
DOWNLOADS = "downloads the 20 newsgroups data set (fetch_20newsgroups)"


def _quickshift_takes_random_seed() -> bool:
    try:
        from skimage.segmentation import quickshift
    except ImportError:
        return False
    return "random_seed" in inspect.signature(quickshift).parameters


RAGGED = (
    "compares ragged lists with np.array_equal, False under this numpy (lime itself fails it); "
    "test_indexed_string_positions_as_lime_expects below checks the same values"
)
RAGGED_SKIP = None if np.array_equal([[0, 8], [2]], [[0, 8], [2]]) else RAGGED
SEED_RENAMED = "the installed scikit-image's quickshift takes `rng`, not `random_seed`, which the case passes it"
CASES: list[tuple[str, str, str, Optional[str]]] = [
    ("test_discretize", "TestDiscretize", "test_random_state", None),
    ("test_discretize", "TestDiscretize", "test_feature_names_1", None),
    ("test_discretize", "TestDiscretize", "test_feature_names_2", None),
    ("test_discretize", "TestDiscretize", "test_feature_names_3", None),
    ("test_lime_text", "TestLimeText", "test_lime_text_explainer_good_regressor", DOWNLOADS),
    ("test_lime_text", "TestLimeText", "test_lime_text_tabular_equal_random_state", DOWNLOADS),
    ("test_lime_text", "TestLimeText", "test_lime_text_tabular_not_equal_random_state", DOWNLOADS),
    ("test_lime_text", "TestLimeText", "test_indexed_characters_bow", None),
    ("test_lime_text", "TestLimeText", "test_indexed_characters_not_bow", None),
    ("test_lime_text", "TestLimeText", "test_indexed_string_regex", RAGGED_SKIP),
    ("test_lime_text", "TestLimeText", "test_indexed_string_callable", RAGGED_SKIP),
    ("test_lime_text", "TestLimeText", "test_indexed_string_inverse_removing_tokenizer", None),
    ("test_lime_text", "TestLimeText", "test_indexed_string_inverse_removing_regex", None),
    ("test_lime_tabular", "TestLimeTabular", "test_lime_explainer_good_regressor", None),
    ("test_lime_tabular", "TestLimeTabular", "test_lime_explainer_good_regressor_synthetic_data", None),
    ("test_lime_tabular", "TestLimeTabular", "test_lime_explainer_sparse_synthetic_data", None),
    ("test_lime_tabular", "TestLimeTabular", "test_lime_explainer_no_regressor", None),
    ("test_lime_tabular", "TestLimeTabular", "test_lime_explainer_entropy_discretizer", None),
    ("test_lime_tabular", "TestLimeTabular", "test_lime_tabular_explainer_equal_random_state", None),
    ("test_lime_tabular", "TestLimeTabular", "test_lime_tabular_explainer_not_equal_random_state", None),
    ("test_lime_tabular", "TestLimeTabular", "testFeatureNamesAndCategoricalFeats", None),
    ("test_lime_tabular", "TestLimeTabular", "testFeatureValues", None),
    ("test_lime_tabular", "TestLimeTabular", "test_lime_explainer_with_data_stats", None),
    ("test_scikit_image", "TestBaseWrapper", "test_base_wrapper", None),
    ("test_scikit_image", "TestBaseWrapper", "test__check_params", None),
    ("test_scikit_image", "TestBaseWrapper", "test_set_params", None),
    ("test_scikit_image", "TestBaseWrapper", "test_filter_params", None),
    (
        "test_scikit_image",
        "TestSegmentationAlgorithm",
        "test_instanciate_segmentation_algorithm",
        None if _quickshift_takes_random_seed() else SEED_RENAMED,
    ),
    ("test_scikit_image", "TestSegmentationAlgorithm", "test_instanciate_slic", None),
    ("test_scikit_image", "TestSegmentationAlgorithm", "test_instanciate_felzenszwalb", None),
]


@pytest.fixture
def lime_shim() -> Iterator[None]:
    """``sys.modules`` entries mapping lime's modules to the compat layer's, removed afterwards."""
    saved = {name: sys.modules.get(name) for name in SHIM}
    sys.modules.update(SHIM)
    try:
        yield
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module


def _load(name: str) -> ModuleType:
    """lime's test module ``name``, imported from its file (its ``lime`` imports resolve to the shim)."""
    path = TESTS / f"{name}.py"
    if not path.is_file():
        pytest.skip(f"lime's wheel ships no {path.name}")
    spec = importlib.util.spec_from_file_location(f"_lime_own_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(("module", "case", "method", "skip"), CASES, ids=[c[2] for c in CASES])
def test_lime_own_case(lime_shim: None, module: str, case: str, method: str, skip: Optional[str]) -> None:
    if skip is not None:
        pytest.skip(skip)
    if module == "test_scikit_image":
        pytest.importorskip("skimage")
    loaded = _load(module)
    assert loaded.__dict__.get(case.split(".")[0]) is not None
    test = getattr(loaded, case)(method)
    outcome = unittest.TestResult()
    test.run(outcome)
    problems = [text for _, text in outcome.errors + outcome.failures]
    assert outcome.wasSuccessful(), "\n".join(problems)


def test_shim_is_removed_after_use() -> None:
    for name, module in SHIM.items():
        assert sys.modules.get(name) is not module


def test_segmentation_algorithm_matches_quickshift() -> None:
    seg = pytest.importorskip("skimage.segmentation")
    data = pytest.importorskip("skimage.data")
    image = data.chelsea()[::4, ::4] / 255.0
    seed = "random_seed" if _quickshift_takes_random_seed() else "rng"
    ours = compat.SegmentationAlgorithm("quickshift", kernel_size=3, max_dist=6, ratio=0.5, random_seed=133)(image)
    theirs = seg.quickshift(image, kernel_size=3, max_dist=6, ratio=0.5, **{seed: 133})
    assert np.array_equal(ours, theirs)


def test_indexed_string_positions_as_lime_expects() -> None:
    regex = compat.IndexedString("Please, take your time. Please")
    assert regex.as_list == ["Please", ", ", "take", " ", "your", " ", "time", ". ", "Please"]
    assert regex.string_start.tolist() == [0, 6, 8, 12, 13, 17, 18, 22, 24]
    assert regex.inverse_vocab == ["Please", "take", "your", "time"]
    assert regex.positions == [[0, 8], [2], [4], [6]]
    pairs = compat.IndexedString("aabbccddaa", lambda s: [s[i : i + 2] for i in range(0, len(s) - 1, 2)])
    assert pairs.as_list == ["aa", "bb", "cc", "dd", "aa"]
    assert pairs.string_start.tolist() == [0, 2, 4, 6, 8]
    assert pairs.inverse_vocab == ["aa", "bb", "cc", "dd"]
    assert pairs.positions == [[0, 4], [1], [2], [3]]
