"""Calls that used to fail or mislead: a torchlime kernel as captum's ``similarity_func`` and a
``numpy.random.Generator`` as lime's ``random_state`` (AttributeErrors), and lime's character mask chr(0),
which NumPy's str arrays dropped (hidden characters were deleted, shifting the rest), and "lasso_path"
explanations padded with features its path never chose."""

from __future__ import annotations

import numpy as np
import torch

from torchlime.compat.captum import Lime
from torchlime.compat.lime import LimeImageExplainer, LimeTextExplainer
from torchlime.stages.weighting import ExponentialKernel


def test_a_torchlime_kernel_as_captums_similarity_func():
    model = torch.nn.Linear(6, 2)
    kernel = ExponentialKernel(width=1.0, space="input")
    x = torch.rand(2, 6)
    torch.manual_seed(0)  # captum draws its masks from torch's global generator, so does the layer
    ours = Lime(model, similarity_func=kernel).attribute(x, target=0, n_samples=40)
    torch.manual_seed(0)
    default = Lime(model).attribute(x, target=0, n_samples=40)  # captum's default: cosine, width 1
    assert torch.equal(ours, default)


def test_a_numpy_generator_as_limes_random_state():
    image = np.zeros((64, 64, 3))
    image[:32, :32] = 1.0
    image[32:, 32:, 1] = 1.0

    def classifier(batch):
        m = batch.mean((1, 2, 3))
        return np.stack([m, 1 - m], 1)

    runs = [
        LimeImageExplainer(random_state=np.random.default_rng(0)).explain_instance(
            image, classifier, num_samples=50, top_labels=1
        )
        for _ in range(2)
    ]
    assert runs[0].local_exp.keys() == runs[1].local_exp.keys()
    first = next(iter(runs[0].local_exp))
    assert runs[0].local_exp[first] == runs[1].local_exp[first]  # the same generator seed, the same run


def test_hidden_characters_keep_their_place_as_in_lime():
    sent = []

    def third_is_g(texts):  # a model that reads one position, as a character CNN or a DNA model may
        sent.extend(texts)
        p = np.array([0.9 if t[2:3] == "G" else 0.1 for t in texts])
        return np.c_[1 - p, p]

    exp = LimeTextExplainer(char_level=True, bow=False, random_state=0).explain_instance(
        "ACGTAC", third_is_g, num_features=3, num_samples=300
    )
    assert {len(t) for t in sent} == {6} and any("\x00" in t for t in sent)  # masked with chr(0), not removed
    (top, weight), *rest = exp.as_list(positions=True)
    assert top == "G_2" and weight > 0.7 and all(abs(w) < 0.02 for _, w in rest)


def test_lasso_path_lists_only_the_features_its_path_chose_as_lime():
    def only_good(texts):
        p = np.array([0.9 if "good" in t.split() else 0.1 for t in texts])
        return np.c_[1 - p, p]

    text = "the plot was good and the cast was fine"
    exp = LimeTextExplainer(feature_selection="lasso_path", random_state=0).explain_instance(
        text, only_good, num_samples=300, num_features=4
    )
    assert [w for w, _ in exp.as_list()] == ["good"]  # the path stops at one word: no zero-weight padding
    full = LimeTextExplainer(feature_selection="highest_weights", random_state=0).explain_instance(
        text, only_good, num_samples=300, num_features=4
    )
    assert len(full.as_list()) == 4  # the other selections still choose num_features
