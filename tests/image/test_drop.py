"""Token dropping (``baseline="drop"``): every family equals a slow batch-1 reference of its kept tokens."""

from __future__ import annotations

import warnings

import pytest
import torch

from torchlime.image import explain_image
from torchlime.image.drop import DropModel, PatchDrop, snap_to_patches, vit_family
from torchlime.image.drop.perturb import runs
from torchlime.stages.perturb.blend import Chunk

from tests.helpers.syncs import count_syncs

SIZE, PATCH = 32, 8  # a 4 x 4 patch grid


def torchvision_vit():
    from torchvision.models.vision_transformer import VisionTransformer

    return VisionTransformer(SIZE, PATCH, num_layers=2, num_heads=2, hidden_dim=32, mlp_dim=64, num_classes=5)


def timm_vit(**kw):
    timm = pytest.importorskip("timm")
    name = kw.pop("name", "vit_tiny_patch16_224")
    return timm.create_model(name, pretrained=False, img_size=SIZE, patch_size=PATCH, num_classes=5, depth=2, **kw)


def hf_vit():
    transformers = pytest.importorskip("transformers")
    cfg = transformers.ViTConfig(
        image_size=SIZE, patch_size=PATCH, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, num_labels=5,
    )  # fmt: skip
    return transformers.ViTForImageClassification(cfg)


FAMILIES = {
    "torchvision": torchvision_vit,
    "timm": timm_vit,
    "timm_avg_pool": lambda: timm_vit(global_pool="avg", class_token=False),
    "timm_registers": lambda: timm_vit(reg_tokens=2, no_embed_class=True),
    "deit_distilled": lambda: timm_vit(name="deit_tiny_distilled_patch16_224"),
    "transformers": hf_vit,
}


def logits(out):
    return out.logits if hasattr(out, "logits") else out


def build(name):
    torch.manual_seed(0)
    return FAMILIES[name]().eval()


@pytest.fixture(scope="module")
def images():
    return torch.rand(3, 3, SIZE, SIZE, generator=torch.Generator().manual_seed(1))


def explain(model, x, **kw):
    with warnings.catch_warnings():  # random tiny models: the quality flags may fire
        warnings.simplefilter("ignore")
        return explain_image(model, x, baseline="drop", **{"n_samples": 120, "generator": 0, **kw})


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_every_token_kept_is_the_model(name, images):
    model = build(name)
    family = vit_family(model)
    with torch.no_grad():
        assert torch.allclose(family.encode(family.embed(images)), logits(model(images)), atol=1e-6)


def reference_outputs(model, images, exp):
    """Each sample's kept tokens alone, at batch 1, through the family's own submodules."""
    family = vit_family(model)
    out = torch.empty(exp.outputs.shape)
    with torch.no_grad():
        for b in range(images.shape[0]):
            tokens = family.embed(images[b : b + 1])
            columns = exp.features[b, 0, ::PATCH, ::PATCH].reshape(-1)  # feature of every patch
            for s in range(exp.samples.shape[1]):
                kept = exp.samples[b, s][columns].nonzero()[:, 0] + family.n_prefix
                idx = torch.cat([torch.arange(family.n_prefix), kept])
                out[b, s] = family.encode(tokens[:, idx])[0, exp.target[b]]
    return out


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_equals_the_batch_one_reference(name, images):
    model = build(name)
    exp = explain(model, images, return_samples=True, n_samples=60, batch_size=16)
    assert exp.run.baseline == "drop"
    torch.testing.assert_close(exp.outputs, reference_outputs(model, images, exp), atol=1e-5, rtol=0)


def test_unperturbed_row_is_the_model(images):
    model = build("torchvision")
    exp = explain(model, images, return_samples=True)
    with torch.no_grad():
        full = model(images).gather(1, exp.target)
    torch.testing.assert_close(exp.outputs[:, 0], full, atol=1e-5, rtol=0)


def test_same_seed_same_bits_and_chunking_does_not_matter(images):
    model = build("torchvision")
    a = explain(model, images, return_samples=True, batch_size=16)
    b = explain(model, images, return_samples=True, batch_size=16)
    c = explain(model, images, return_samples=True, batch_size=500)
    assert torch.equal(a.coef, b.coef) and torch.equal(a.outputs, b.outputs)
    torch.testing.assert_close(a.outputs, c.outputs, atol=1e-5, rtol=0)


@pytest.mark.parametrize("sampler", ["uniform_count", "shapley"])
def test_other_designs(sampler, images):
    model = build("torchvision")
    exp = explain(model, images[:1], sampler=sampler, return_samples=True, n_samples=40)
    torch.testing.assert_close(exp.outputs, reference_outputs(model, images[:1], exp), atol=1e-5, rtol=0)


def test_unsorted_chunks_sort_themselves(images):
    """A chunk without keys (a metric replaying masks) gives the rows in their own order."""
    model = build("torchvision")
    family = vit_family(model)
    masks = torch.rand(10, 16, generator=torch.Generator().manual_seed(3)) > 0.5
    index = torch.arange(16).view(4, 4).repeat_interleave(PATCH, 0).repeat_interleave(PATCH, 1).view(1, 1, SIZE, SIZE)
    rows = torch.tensor([0, 1, 2, 0, 1, 2, 0, 1, 2, 0])
    fn = PatchDrop(PATCH)
    unsorted = fn(images, images, index, Chunk(masks, rows, torch.ones_like(rows), 0, -1))
    assert unsorted[3] is None
    with torch.no_grad():
        got = DropModel(family)(*unsorted)
        for r in range(10):
            idx = torch.cat([torch.zeros(1, dtype=torch.long), masks[r].nonzero()[:, 0] + 1])
            want = family.encode(family.embed(images[rows[r] : rows[r] + 1])[:, idx])
            torch.testing.assert_close(got[r : r + 1], want, atol=1e-5, rtol=0)


def test_runs():
    assert runs([]) == ()
    assert runs([5, 5, 5]) == ((3, 5),)
    assert runs([16, 3, 3, 4]) == ((1, 16), (2, 3), (1, 4))


def test_snapped_segments_are_constant_on_patches(images):
    model = build("torchvision")
    exp = explain(model, images, segments="slic", n_segments=6)
    f = exp.features[:, 0]
    blocks = f.view(3, 4, PATCH, 4, PATCH)
    assert (blocks == blocks[:, :, :1, :, :1]).all()
    assert exp.meta["image"]["segments"] == "slic"


def test_snap_majority():
    lab = torch.zeros(1, 4, 4, dtype=torch.long)
    lab[0, :2, :2] = torch.tensor([[3, 3], [3, 1]])
    assert snap_to_patches(lab, 2)[0, :2, :2].eq(3).all()
    assert snap_to_patches(lab, 2)[0, 2:, 2:].eq(0).all()


def test_default_features_are_the_patches(images):
    exp = explain(build("torchvision"), images[:1])
    assert exp.n_features.tolist() == [16] and exp.meta["image"]["segments"] == "patches"


def test_normalize_is_applied_before_the_model(images):
    model = build("torchvision")
    mean, std = (0.5, 0.4, 0.3), (0.2, 0.25, 0.3)
    a = explain(model, images, normalize=(mean, std), return_samples=True)
    pre = (images - torch.tensor(mean).view(1, 3, 1, 1)) / torch.tensor(std).view(1, 3, 1, 1)
    b = explain(model, pre, return_samples=True)
    torch.testing.assert_close(a.outputs, b.outputs, atol=1e-5, rtol=0)


def test_no_host_sync_per_chunk(images):
    model = build("torchvision")
    counts = []
    for chunk in (500, 16):
        explain(model, images[:2], batch_size=chunk)
        with count_syncs() as ops:
            explain(model, images[:2], batch_size=chunk)
        counts.append(len(ops))
    assert counts[0] == counts[1], counts


def test_unsupported_model_names_the_families(images):
    net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * SIZE * SIZE, 5))
    with pytest.raises(TypeError, match="torchvision.models.VisionTransformer.*timm.*ViTForImageClassification"):
        explain(net, images)


def test_wrong_size_and_input_kernel_refused(images):
    model = build("torchvision")
    with pytest.raises(ValueError, match="`images` must be 32x32"):
        explain(model, torch.rand(1, 3, 40, 40))
    with pytest.raises(ValueError, match="space='mask'"):
        explain(model, images, kernel="captum")


def test_inputs_untouched(images):
    before = images.clone()
    explain(build("torchvision"), images, normalize=((0.5,) * 3, (0.2,) * 3))
    assert torch.equal(images, before)


@pytest.mark.parametrize(
    "kw", [dict(accelerate="fast"), dict(chunk_format=__import__("torchlime").accel.InputFormat())]
)
def test_image_only_settings_refused(kw, images):
    with pytest.raises(ValueError, match="does not apply with baseline='drop'"):
        explain(build("torchvision"), images, **kw)
