"""How the head is trained: the relative loss of the table head and the table's default N."""

from __future__ import annotations

import pytest
import torch

from torchlime.amortized import TABLE_SAMPLES, AmortizedExplainer, AmortizedProbe, _train
from torchlime.amortized._options import ROW_FLOOR, Training

D, K = 4, 2
FEATS = torch.arange(D).view(1, D)


class Linear(torch.nn.Module):
    """A head whose output is a linear map of the row: (B, D) -> (B, K, D + 1)."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.lin = torch.nn.Linear(D, K * (D + 1))

    def forward(self, x):
        return self.lin(x).view(-1, K, D + 1)


def _reference_loss(out, values, labelled, relative):
    """The masked mean squared error, entry by entry in plain Python (the slow, obvious form)."""
    scale = values[labelled].square().mean().sqrt()
    total, count = 0.0, 0
    for i in range(values.shape[0]):
        for k in range(K):
            if not labelled[i, k]:
                continue
            coef = values[i, k, :-1]
            w = scale**2 / (coef.square().mean() + (ROW_FLOOR * scale) ** 2) if relative else 1.0
            for f in range(D + 1):
                total += (w if f < D else 1.0) * float((out[i, k, f] - values[i, k, f]) / scale) ** 2
                count += 1
    return total / count


@pytest.mark.parametrize("relative", [False, True])
def test_the_loss_weighs_each_rows_coefficient_errors_in_its_own_scale(relative):
    """One step at a learning rate too small to move the weights: the epoch's loss is the loss of the start."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(12, D, generator=g)
    size = torch.tensor([1.0, 1e-3, 1e-5, 0.3]).repeat(3).view(12, 1, 1)  # rows of small coefficients too
    values = torch.randn(12, K, D + 1, generator=g) * size
    labelled = torch.rand(12, K, generator=g) < 0.7
    labelled[:, 0] = True
    values = values * labelled.unsqueeze(-1)
    head = Linear()
    with torch.no_grad():
        out = head(x)
    training = Training(epochs=1, batch_size=12, lr=1e-30)
    loss = _train.train(head, x, values, labelled, training, 0, relative=relative)[0]
    assert loss == pytest.approx(float(_reference_loss(out, values, labelled, relative)), rel=1e-5)


def test_row_weights_are_floored_and_leave_the_intercept_alone():
    values = torch.tensor([[[2.0, 0.0, 7.0]], [[0.0, 0.0, 7.0]]])
    w = _train.row_weights(values, torch.tensor(2.0), floor=0.5)
    torch.testing.assert_close(w[0, 0], torch.tensor([4 / (2 + 1), 4 / (2 + 1), 1.0]))
    torch.testing.assert_close(w[1, 0], torch.tensor([4.0, 4.0, 1.0]))  # all-zero row: 1 / floor²


def test_tables_default_to_the_relative_loss_at_table_samples():
    """A table's built-in head: N = TABLE_SAMPLES and the relative loss unless told; inputs read once."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(D, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    x = torch.rand(60, D, generator=torch.Generator().manual_seed(1))
    options = {"modality": FEATS, "epochs": 1, "report_samples": None, "copies": 1}
    once = AmortizedExplainer.fit(net, (x[i : i + 20] for i in range(0, 60, 20)), **options)  # a one-shot iterable
    assert once.label_samples == TABLE_SAMPLES and once.settings["loss"] == "relative"
    same = AmortizedExplainer.fit(net, x, **options)
    assert same.settings["head_digest"] == once.settings["head_digest"]
    absolute = AmortizedExplainer.fit(net, x, loss="absolute", **options)
    assert absolute.settings["loss"] == "absolute"
    assert absolute.settings["head_digest"] != same.settings["head_digest"]
    with pytest.raises(ValueError, match=r"`loss` must be None or one of \['absolute', 'relative'\], got str 'l1'"):
        AmortizedExplainer.fit(net, x, loss="l1", **options)


def test_the_probe_keeps_the_tables_n_and_loss_through_its_warm_starts():
    """Refreshes after the first train the last head on (a given MLPHead): still the relative loss, the first N."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(D, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    x = torch.rand(30, D, generator=torch.Generator().manual_seed(2))
    probe = AmortizedProbe(net, x[:2], x, FEATS, refresh=1, epochs=1, copies=1)
    for step in range(2):
        probe.explain(step)
    assert probe.refits == [0, 1] and probe.amortized is not None
    assert probe.amortized.label_samples == TABLE_SAMPLES and probe.amortized.settings["loss"] == "relative"
