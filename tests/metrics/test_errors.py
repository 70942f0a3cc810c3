"""Bad arguments to torchlime.metrics raise TypeError / ValueError naming the argument, what was expected
and what came."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from torchlime import Explanation, explain
from torchlime.metrics import (
    GaussianNoise,
    UniformNoise,
    deletion,
    faithfulness_correlation,
    gold_recall,
    infidelity,
    insertion,
    jaccard_topk,
    kendall_w,
    label_flip,
    max_sensitivity,
    plot_curves,
    region_perturbation,
    token_roc_auc,
)

from tests.helpers import grid_labels


@pytest.fixture(scope="module")
def case():
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(16, 3))
    x = torch.rand(2, 1, 4, 4, generator=torch.Generator().manual_seed(0))
    exp = explain(model, x, grid_labels(4, 4, 2, 2).view(1, 1, 4, 4), n_samples=32)
    return model, x, exp


def test_curve_arguments(case):
    model, x, exp = case
    with pytest.raises(ValueError, match="`steps` must be >= 1, got 0"):
        deletion(model, x, exp, steps=0)
    with pytest.raises(TypeError, match="`steps` must be an int >= 1, got str '3'"):
        insertion(model, x, exp, steps="3")
    with pytest.raises(TypeError, match="`return_curves` must be a bool, got str 'yes'"):
        deletion(model, x, exp, return_curves="yes")
    with pytest.raises(TypeError, match="`softmax` must be a bool, got int 1"):
        deletion(model, x, exp, softmax=1)
    with pytest.raises(ValueError, match="`batch_size` must be >= 1, got 0"):
        insertion(model, x, exp, batch_size=0)
    with pytest.raises(TypeError, match="`explanation` must be a torchlime.Explanation, got a tensor of shape"):
        deletion(model, x, exp.coef)
    with pytest.raises(TypeError, match="`model` must be an nn.Module or a callable, got str"):
        deletion("net", x, exp)
    with pytest.raises(TypeError, match="`inputs` must be a torch.Tensor, got list"):
        deletion(model, [1, 2], exp)
    with pytest.raises(
        ValueError,
        match=r"`inputs` must be the explanation's 2 inputs, batched \(B, \.\.\.\), "
        r"got shape \(3, 1, 4, 4\)",
    ):
        deletion(model, torch.rand(3, 1, 4, 4), exp)
    with pytest.raises(ValueError, match="`order` must be one of \\['morf', 'lerf'\\], got 'most'"):
        region_perturbation(model, x, exp, order="most")
    with pytest.raises(ValueError, match="`baseline` string must be one of"):
        deletion(model, x, exp, baseline="grey")
    with pytest.raises(ValueError, match="`baseline` must be finite, got nan"):
        deletion(model, x, exp, baseline=float("nan"))


def test_explanations_without_their_perturbation(case, tmp_path):
    model, x, exp = case
    exp.save(tmp_path / "e.pt")
    back = Explanation.load(tmp_path / "e.pt")
    with pytest.raises(
        ValueError,
        match=r"`explanation.features` \(2, 1, 4, 4\) must broadcast to `inputs` "
        r"\(2, 16\)",
    ):
        deletion(model, x.view(2, 16), back)
    with pytest.raises(ValueError, match="`explanation.features` must number the features of `inputs`"):
        deletion(model, x, dataclasses.replace(back, n_features=torch.tensor([4, 3])))


def test_hiding_test_arguments(case):
    model, x, exp = case
    with pytest.raises(ValueError, match="`k` must be >= 1, got 0"):
        label_flip(model, x, exp, k=0)
    with pytest.raises(ValueError, match="`by` must be one of \\['value', 'abs'\\], got 'rank'"):
        label_flip(model, x, exp, k=1, by="rank")
    with pytest.raises(ValueError, match="`n_subsets` must be >= 2, got 1"):
        faithfulness_correlation(model, x, exp, n_subsets=1)
    with pytest.raises(ValueError, match=r"`subset_size` as a fraction must be in \(0, 1\], got 1.5"):
        faithfulness_correlation(model, x, exp, subset_size=1.5)
    with pytest.raises(TypeError, match="`subset_size` must be None, an int >= 1 or a fraction"):
        faithfulness_correlation(model, x, exp, subset_size="half")
    with pytest.raises(TypeError, match="`generator` must be None, an int seed or a torch.Generator"):
        faithfulness_correlation(model, x, exp, generator="seed")


def test_captum_metric_arguments(case):
    model, x, exp = case
    with pytest.raises(ValueError, match=r"`perturbations` must have shape \(2, n, 1, 4, 4\), got \(2, 3, 16\)"):
        infidelity(model, x, exp, perturbations=torch.rand(2, 3, 16))
    with pytest.raises(ValueError, match=r"`inputs` must be real floating \(2, 1, 4, 4\)"):
        infidelity(model, x.long(), exp)
    with pytest.raises(ValueError, match="`GaussianNoise.scale` must be finite and > 0, got -1.0"):
        GaussianNoise(scale=-1.0)
    with pytest.raises(ValueError, match="`GaussianNoise.n` must be >= 1, got 0"):
        GaussianNoise(n=0)
    with pytest.raises(TypeError, match="`perturbations` must be None, a GaussianNoise, a UniformNoise or a tensor"):
        infidelity(model, x, exp, perturbations=0.1)
    with pytest.raises(TypeError, match="`normalize` must be a bool"):
        infidelity(model, x, exp, normalize="yes")
    with pytest.raises(TypeError, match="`explain_fn` must be a callable"):
        max_sensitivity(model, x, "saliency")
    with pytest.raises(TypeError, match="max_sensitivity needs how to explain"):
        max_sensitivity(model, x)
    with pytest.raises(TypeError, match="`model` must be the model explained"):
        max_sensitivity(None, x, lambda m, v: v)
    with pytest.raises(TypeError, match="`explain_fn` must return an Explanation or a tensor, got list"):
        max_sensitivity(model, x, lambda m, v: [1])
    with pytest.raises(ValueError, match="`UniformNoise.radius` must be finite and > 0, got 0.0"):
        UniformNoise(radius=0.0)
    with pytest.raises(TypeError, match="`perturbations` must be None, a GaussianNoise, a UniformNoise or a tensor"):
        max_sensitivity(model, x, lambda m, v: v, perturbations=[0.1])
    with pytest.raises(ValueError, match="`norm_ord` must be finite and > 0"):
        max_sensitivity(model, x, lambda m, v: v, norm_ord=-2)
    with pytest.raises(ValueError, match=r"`explain_fn` must return one explanation per input \(2 rows\)"):
        max_sensitivity(model, x, lambda m, v: v[:1])
    with pytest.raises(ValueError, match=r"`explain_fn` must return explanations of one shape \(16,\)"):
        max_sensitivity(model, x, lambda m, v: v if v.shape[0] == 2 else v[..., :2], perturbations=UniformNoise(n=2))


def test_an_unknown_option_is_named_with_the_options_taken(case):
    model, x, exp = case
    with pytest.raises(TypeError, match=r"^deletion\(\) got an unexpected keyword argument 'batchsize'; its options "
                       r"are batch_size, output, progress, softmax$"):  # fmt: skip
        deletion(model, x, exp, batchsize=4)
    with pytest.raises(TypeError, match=r"^label_flip\(\) got an unexpected keyword argument 'softmax'; its options "
                       r"are batch_size, output, progress$"):  # fmt: skip
        label_flip(model, x, exp, k=2, softmax=True)
    with pytest.raises(
        TypeError, match=r"infidelity\(\) got unexpected keyword arguments \['n_perturb', 'noise_scale'\]"
    ):
        infidelity(model, x, exp, n_perturb=4, noise_scale=0.2)
    with pytest.raises(TypeError, match="`progress` must be a bool"):
        faithfulness_correlation(model, x, exp, progress="yes")
    with pytest.raises(ValueError, match="`batch_size` must be >= 1"):
        region_perturbation(model, x, exp, batch_size=0)


def test_stability_and_ground_truth_arguments(case):
    model, x, exp = case
    with pytest.raises(ValueError, match="`explanations` must be a list of at least 2 explanations"):
        jaccard_topk([exp], 2)
    with pytest.raises(TypeError, match=r"`explanations\[1\]` must be a torchlime.Explanation, got int"):
        kendall_w([exp, 3])
    other = explain(model, x, grid_labels(4, 4, 1, 2).view(1, 1, 4, 4), n_samples=32)
    with pytest.raises(
        ValueError,
        match=r"`explanations` must explain the same inputs, features and targets: "
        r"explanations\[1\] has coef \(2, 1, 2\)",
    ):
        kendall_w([exp, other])
    with pytest.raises(ValueError, match=r"`gold` must be a bool tensor \(2, 4\) over the features"):
        gold_recall(exp, torch.ones(2, 5, dtype=torch.bool), 2)
    with pytest.raises(TypeError, match="`gold` must be a bool tensor .* or a list of 2 lists of feature indices"):
        gold_recall(exp, [[0]], 2)
    with pytest.raises(
        ValueError,
        match=r"`gold\[1\]` must hold feature indices in \[0, 4\) \(input 1 has 4 "
        r"features\), got \[4\]",
    ):
        gold_recall(exp, [[0], [4]], 2)
    with pytest.raises(TypeError, match=r"`rationale\[0\]` must be a list of int feature indices"):
        token_roc_auc(exp, [[0.5], [1]])


def test_plot_arguments():
    pytest.importorskip("matplotlib")
    with pytest.raises(ValueError, match="`labels` must hold 2 names"):
        plot_curves(torch.rand(2, 3), torch.linspace(0, 1, 3), ["one"])
    with pytest.raises(ValueError, match=r"`x` \(4,\) must match `curves` \(2, 3\)"):
        plot_curves(torch.rand(2, 3), torch.linspace(0, 1, 4))
    with pytest.raises(TypeError, match="`curves` must be a torch.Tensor"):
        plot_curves([0.1, 0.2], torch.linspace(0, 1, 2))


def test_other_inputs_than_the_explained_ones_are_refused(case):
    model, x, exp = case
    with pytest.raises(ValueError, match="`inputs` must be the inputs `explanation` explained, got other values"):
        deletion(model, torch.rand_like(x), exp)
    assert torch.equal(deletion(model, x.clone(), exp), deletion(model, x, exp))  # equal values are the inputs


def test_a_loaded_explanation_hides_features_with_its_recorded_fill(tmp_path):
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(16, 3))
    x = torch.rand(2, 1, 4, 4, generator=torch.Generator().manual_seed(1)) + 1  # a 0 fill is far from "mean"
    exp = explain(model, x, grid_labels(4, 4, 2, 2).view(1, 1, 4, 4), n_samples=32, baseline="mean")
    exp.save(tmp_path / "e.pt")
    loaded = Explanation.load(tmp_path / "e.pt")
    assert loaded.perturbation is None and loaded.run.baseline == "mean"
    assert torch.allclose(deletion(model, x, loaded), deletion(model, x, exp), atol=1e-6)
    assert not torch.allclose(deletion(model, x, loaded, baseline=0.0), deletion(model, x, exp), atol=1e-3)
    explain(model, x, grid_labels(4, 4, 2, 2).view(1, 1, 4, 4), n_samples=32, baseline=torch.full_like(x, 0.5)).save(
        tmp_path / "t.pt"
    )
    with pytest.warns(UserWarning, match=r"fill \(a tensor of shape .*\) was not saved with it"):
        deletion(model, x, Explanation.load(tmp_path / "t.pt"))


def test_a_front_doors_own_perturbation_is_not_rebuilt_as_a_blend(tmp_path):
    from torchlime.text import explain_tokens

    def model(ids):
        return torch.stack([(ids == 7).float().sum(1) - 0.5 * (ids == 0).float().sum(1)], 1)

    ids = torch.randint(10, 50, (2, 10), generator=torch.Generator().manual_seed(0))
    ids[:, 3] = 7
    exp = explain_tokens(model, ids, mask_id=1, n_samples=64)
    assert exp.run.perturbation == "custom"
    kept = exp.to("cpu")  # the same device: the record stays
    assert kept.perturbation is exp.perturbation and torch.equal(deletion(model, ids, kept), deletion(model, ids, exp))
    exp.save(tmp_path / "t.pt")
    with pytest.raises(ValueError, match="hid its features by text mode 'replace', which is not saved with it"):
        deletion(model, ids, Explanation.load(tmp_path / "t.pt"))  # a blend with 0 would hide tokens as PAD


def test_a_rebuilt_blend_normalises_as_the_explanation_did(tmp_path):
    from torchlime.image import explain_image

    net = torch.nn.Sequential(
        torch.nn.Conv2d(3, 4, 3), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(4, 2)
    )
    torch.manual_seed(0)
    x = torch.rand(2, 3, 16, 16, generator=torch.Generator().manual_seed(2))
    norm = ((0.4, 0.5, 0.6), (0.2, 0.25, 0.3))
    exp = explain_image(net, x, segments="grid", n_segments=16, normalize=norm, n_samples=32, target=0)
    assert exp.run.normalize == [list(norm[0]), list(norm[1])]
    whole = deletion(net, x, exp)
    exp.save(tmp_path / "n.pt")
    assert torch.allclose(deletion(net, x, Explanation.load(tmp_path / "n.pt")), whole, atol=1e-6)
    assert torch.allclose(deletion(net, x[1:], exp[1]), whole[1:], atol=1e-6)  # exp[j] drops the record


def test_numpy_batch_sizes_are_fixed_chunks():
    import numpy as np

    from torchlime.stages.forward.chunking import ChunkPlan

    plan = ChunkPlan(torch.nn.Identity(), ("sig",), torch.device("cpu"), np.int64(8), None)
    assert plan.fixed == 8 and type(plan.fixed) is int
