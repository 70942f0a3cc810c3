"""Every bad input gets a clear error naming the argument, what was expected and what came."""

from __future__ import annotations

import pytest
import torch

from torchlime import explain

from tests.helpers import SegmentLinear, grid_labels


@pytest.fixture
def case():
    x = torch.rand(2, 3, 8, 8)
    labels = grid_labels(8, 8, 2, 2)
    return SegmentLinear(labels, 4), x, labels.view(1, 1, 8, 8)


def test_shape_mismatch(case):
    model, x, f = case
    with pytest.raises(
        ValueError,
        match=r"`features` must have shape \(B or 1, \.\.\.\) broadcastable to "
        r"`inputs` \(2, 3, 8, 8\), got \(1, 1, 7, 8\)",
    ):
        explain(model, x, f[..., :7, :])
    with pytest.raises(ValueError, match=r"got \(3, 1, 8, 8\)"):
        explain(model, x, f.expand(3, 1, 8, 8))


def test_unbatched_inputs(case):
    model, _, f = case
    with pytest.raises(ValueError, match=r"`inputs` must be batched with shape \(B, \.\.\.\), got shape \(5,\)"):
        explain(model, torch.rand(5), f)


def test_features_on_another_device(case):
    model, x, f = case
    with pytest.raises(ValueError, match=r"`features` must be on the same device as `inputs` \(cpu\), got meta"):
        explain(model, x, f.to("meta"))


def test_non_integer_features(case):
    model, x, f = case
    with pytest.raises(
        TypeError,
        match=r"`features` must have an integer dtype \(e.g. torch.long\), "
        r"got torch.float32",
    ):
        explain(model, x, f.float())


def test_non_tensor_arguments(case):
    model, x, f = case
    with pytest.raises(TypeError, match="`inputs` must be a torch.Tensor, got list"):
        explain(model, x.tolist(), f)


def test_too_few_samples(case):
    model, x, f = case
    with pytest.raises(ValueError, match="`n_samples` must be >= 2, got 1"):
        explain(model, x, f, n_samples=1)
    with pytest.raises(TypeError, match="`n_samples` must be an int >= 2, got float 10.0"):
        explain(model, x, f, n_samples=10.0)


def test_target_out_of_range(case):
    model, x, f = case
    with pytest.raises(ValueError, match=r"`target` must be in \[0, 3\) for a model with 3 outputs, got 7"):
        explain(model, x, f, target=7, n_samples=10)
    with pytest.raises(ValueError, match=r"`target` must be in \[0, 3\).*got \[-1\]"):
        explain(model, x, f, target=torch.tensor([0, -1]), n_samples=10)
    with pytest.raises(ValueError, match=r"`target` tensor must have shape \(2,\) or \(2, T\), got \(3,\)"):
        explain(model, x, f, target=torch.tensor([0, 1, 2]), n_samples=10)
    with pytest.raises(ValueError, match="`target` string must be 'all' or 'topK'"):
        explain(model, x, f, target="best", n_samples=10)
    with pytest.raises(TypeError, match="`target` must have an integer dtype"):
        explain(model, x, f, target=torch.tensor([0.0, 1.0]), n_samples=10)


def test_model_output_wrong_shape(case):
    _, x, f = case
    with pytest.raises(
        ValueError,
        match=r"model output must have shape \((\d+),\) or \(\1, K\) for a batch of \1 "
        r"inputs, got shape \(\1, 3, 4\)",
    ):
        explain(lambda v: torch.zeros(v.shape[0], 3, 4), x, f, n_samples=10)
    with pytest.raises(ValueError, match=r"model output must be a tensor of scores \(pass `output=`"):
        explain(lambda v: "scores", x, f, n_samples=10)
    with pytest.raises(ValueError, match="`output` selector 'probs' does not apply"):
        explain(lambda v: {"logits": torch.zeros(v.shape[0], 2)}, x, f, n_samples=10, output="probs")


def test_non_finite_outputs(case):
    model, x, f = case

    def bad(v):
        out = model(v)
        # NaN whenever the top-left quadrant of the second input is hidden
        return torch.where(
            (v[:, 0, 0, 0] == 0).unsqueeze(1) & (v[:, 1, 7, 7] > -1).unsqueeze(1),
            torch.full_like(out, float("nan")),
            out,
        )

    x2 = x.clone()
    x2[0] += 1.0  # (0, 0, 0) is 0 only when its feature is hidden (baseline 0)
    with pytest.raises(
        ValueError,
        match=r"the model returned non-finite outputs for \d+ of 40 samples "
        r"\(inputs \[0, 1\]\)",
    ):
        explain(bad, x2, f, n_samples=20)


def test_non_finite_only_some_inputs(case):
    model, x, f = case

    def bad(v):
        out = model(v)
        marker = (v[:, 0, 7, 7] > 5).unsqueeze(1)  # only input 1 carries the marker
        return torch.where(marker, torch.full_like(out, float("inf")), out)

    x2 = x.clone()
    x2[1, 0, 7, 7] = 10.0
    with pytest.raises(ValueError, match=r"non-finite outputs for \d+ of 40 samples \(inputs \[1\]\)"):
        explain(bad, x2, f, n_samples=20)


def test_single_feature_input(case):
    model, x, f = case
    f2 = torch.stack([f[0], torch.zeros_like(f[0])])
    with pytest.raises(
        ValueError,
        match=r"every input needs at least 2 features to explain; `inputs` rows \[1\] "
        r"have fewer",
    ):
        explain(model, x, f2)


def test_other_arguments(case):
    model, x, f = case
    with pytest.raises(ValueError, match="`batch_size` must be >= 1, got 0"):
        explain(model, x, f, batch_size=0)
    with pytest.raises(TypeError, match="`generator` must be None, an int seed or a torch.Generator"):
        explain(model, x, f, generator="seed")
    with pytest.raises(ValueError, match=r"`masks` must be bool with shape \(2, 10, 4\)"):
        explain(model, x, f, n_samples=10, masks=torch.ones(2, 10, 5, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"`preset` must be None or one of \['lime'"):
        explain(model, x, f, preset="shap")


def test_non_finite_inputs_and_baseline(case):
    model, x, f = case
    x2 = x.clone()
    x2[1, 0, 0, 0] = float("nan")
    with pytest.raises(ValueError, match=r"`inputs` must be finite, got 1 NaN/inf values \(inputs \[1\]\)"):
        explain(model, x2, f)
    with pytest.raises(ValueError, match=r"`baseline` must be finite, got inf"):
        explain(model, x, f, baseline=float("inf"))
    with pytest.raises(ValueError, match=r"`baseline` must be finite, got 384 NaN/inf values \(inputs \[0, 1\]\)"):
        explain(model, x, f, baseline=torch.full_like(x, float("nan")))


def test_error_messages_describe_values_without_dumping_them():
    import numpy as np

    from torchlime._util.checks import describe

    assert describe({"logits": torch.zeros(2, 3), "aux": 1}) == "dict with keys ['logits', 'aux']"
    assert describe(np.zeros((2, 3))) == "ndarray of shape (2, 3), dtype float64"
    assert describe(list(range(1000))) == "list of 1000 items (the first: int 0)"
    assert describe([torch.zeros(2)]).startswith("list of 1 items (the first: a tensor of shape (2,)")
    assert describe("grid") == "str 'grid'"


def test_numpy_integers_count_as_ints(case):
    import numpy as np

    model, x, f = case
    exp = explain(model, x, f, n_samples=np.int64(16), batch_size=np.int32(8))
    assert exp.run.n_samples == 16 and type(exp.run.n_samples) is int and exp.run.batch_size == 8
    with pytest.raises(TypeError, match="`n_samples` must be an int >= 2, got bool"):
        explain(model, x, f, n_samples=np.bool_(True))


def test_mean_fill_over_single_element_features():
    """``baseline="mean"`` of one-element features is the input: refused, not 1000 identical samples."""
    import torchlime

    x = torch.rand(2, 1, 4, 4)
    pixels = torch.arange(16).view(1, 1, 4, 4)  # every pixel its own feature
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(16, 3))
    with pytest.raises(ValueError, match=r'`baseline="mean"` .* is the input itself here: every feature of `inputs`'):
        explain(model, x, pixels, baseline="mean", n_samples=16)
    series = torch.randn(2, 3, 50)  # channel features (1, C, 1): one element per channel and step
    with pytest.raises(ValueError, match=r"every feature of `series` is a single element .*shape \(3, 1\), 3 features"):
        torchlime.Explainer(baseline="mean").explain(lambda s: s[:, 1].mean(-1), series, torchlime.Series("channel"))
    # features of several elements, and the other fills of single-element features, are explained as before
    assert explain(model, x, pixels // 2, baseline="mean", n_samples=16).coef.abs().sum() > 0
    assert explain(model, x, pixels, baseline="signal_mean", n_samples=16).coef.abs().sum() > 0
    channels = torchlime.Explainer().explain(lambda s: s[:, 1].pow(2).mean(-1), series, torchlime.Series("channel"))
    assert channels.coef[:, 0].abs().argmax(-1).tolist() == [1, 1]  # the Series' own fill: each channel's mean
