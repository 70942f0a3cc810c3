"""Two calls that used to fail with an AttributeError: a torchlime kernel as captum's ``similarity_func``
and a ``numpy.random.Generator`` as lime's ``random_state``."""

from __future__ import annotations

import numpy as np
import torch

from torchlime.compat.captum import Lime
from torchlime.compat.lime import LimeImageExplainer
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
