"""Labels from a finished explain_dataset folder, and the training-loop probe."""

from __future__ import annotations

import random

import pytest
import torch

import torchlime
from torchlime.amortized import AmortizedExplainer
from torchlime.amortized.probe import AmortizedProbe
from torchlime.dataset import explain_dataset, load_results

D = 6
FEATS = torch.arange(D).view(1, D)


def _net() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(D, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))


def test_labels_from_a_folder_train_the_same_head_as_the_engines_own(tmp_path):
    """explain_dataset's masks derive from (seed, index), as fit's: the same labels, the same head, bit for bit."""
    net, x = _net(), torch.rand(48, D, generator=torch.Generator().manual_seed(2))
    call = torchlime.Call(n_samples=32, generator=5)
    explain_dataset(net, x, tmp_path, modality=FEATS, call=call, progress=False, keep=("features", "inputs"))
    options = {"epochs": 2, "report_samples": None, "generator": 5}
    from_folder = AmortizedExplainer.fit(net, None, modality=FEATS, labels=load_results(tmp_path), **options)
    from_engine = AmortizedExplainer.fit(net, x, modality=FEATS, n_samples=32, copies=0, **options)
    assert from_folder.label_samples == 32 and from_folder.settings["jittered_copies"] == 0  # rows as stored
    assert from_folder.settings["head_digest"] == from_engine.settings["head_digest"]
    given = AmortizedExplainer.fit(net, x, modality=FEATS, labels=load_results(tmp_path)[:], **options)
    assert given.settings["head_digest"] == from_engine.settings["head_digest"]


def test_a_folder_without_inputs_needs_them(tmp_path):
    net, x = _net(), torch.rand(16, D)
    explain_dataset(net, x, tmp_path, modality=FEATS, call=torchlime.Call(n_samples=16), progress=False)
    with pytest.raises(ValueError, match="`inputs` must be the data set's inputs"):
        AmortizedExplainer.fit(net, None, modality=FEATS, labels=load_results(tmp_path), epochs=1)


def test_the_probe_refreshes_every_k_steps_and_leaves_training_alone():
    net = _net()
    probe_x, train_x = torch.rand(3, D), torch.rand(40, D)
    net.train()
    for p in net.parameters():
        p.grad = torch.ones_like(p)
    probe = AmortizedProbe(
        net, probe_x, train_x, FEATS, call=torchlime.Call(n_samples=16), refresh=2, epochs=1, max_history=3
    )
    torch.manual_seed(7)
    random.seed(7)
    expected = (torch.rand(2), random.random())
    torch.manual_seed(7)
    random.seed(7)
    shapes = [probe.explain(step).coef.shape for step in range(5)]
    assert torch.equal(torch.rand(2), expected[0]) and random.random() == expected[1]  # the global RNG as it was
    assert shapes == [(3, 1, D)] * 5 and probe.refits == [0, 2, 4]
    assert [s for s, _ in probe.history] == [2, 3, 4]
    assert net.training and all(torch.equal(p.grad, torch.ones_like(p)) for p in net.parameters())
    # between refreshes every step is one forward of the same head
    assert torch.equal(probe.history[0][1].coef, probe.history[1][1].coef)
    assert torch.equal(probe.history[-1][1].coef, probe.amortized.explain(probe_x).coef)


def test_refreshed_fits_again_with_the_same_settings():
    net, x = _net(), torch.rand(32, D)
    first = AmortizedExplainer.fit(net, x, modality=FEATS, n_samples=16, epochs=1, report_samples=None)
    again = first.refreshed(net, x, epochs=1, report_samples=None)
    assert again.label_samples == 16 and again.settings["head_digest"] == first.settings["head_digest"]
    assert "labels at N=16" in repr(again)
