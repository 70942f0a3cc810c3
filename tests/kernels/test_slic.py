"""SLIC kernels (``kernels/torchlime_kernels/slic.py``) against their torch references, the backend routing and
the kernel path of SLIC (``image._slic.iterate_triton``).

Kernel cases are parametrised over two devices, exactly as in ``test_kernels.py``:

* ``interp``: CPU tensors through Triton's interpreter. Run here when this process already
  interprets the kernels (started with ``TRITON_INTERPRET=1``); otherwise skipped here and run by
  ``test_interpreter_cases_in_child_process`` in a child ``python -m pytest`` with
  ``TRITON_INTERPRET=1`` (this module never touches ``os.environ``).
* ``cuda``: the compiled kernels; skipped without a CUDA device.

Exactness: under the interpreter ``assign`` matches ``assign_torch`` bit for bit (same per-feature
accumulation order); compiled kernels may fuse multiply-adds, so on CUDA distances are compared
with a tolerance and labels only where the reference's best and second-best distances differ
clearly. ``update`` sums in another order than ``update_torch`` (lanes + a tree reduction): sums
within a tolerance, counts exactly.
"""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton")

from torchlime import _backend  # noqa: E402
from torchlime.image._slic import finish, iterate_triton, seed_grid, to_lab  # noqa: E402
from torchlime.image.segments import slic  # noqa: E402
from torchlime.kernels import slic as K  # noqa: E402
from torchlime.kernels.reference import assign_torch, slic_features, update_torch  # noqa: E402

from tests.helpers.triton_interp import KERNEL_DEVICES, kernel_device, run_interp_cases_in_child  # noqa: E402

INTERPRETED = K.interpreted()
HAS_CUDA = torch.cuda.is_available()


def slic_triton(
    images, n_segments=100, compactness=10.0, n_iter=10, max_size_factor=3.0, min_size_factor=0.25, lab=True
):
    """SLIC through the kernel path: ``_backend.slic_assign`` / ``slic_update`` (the kernels where
    the backend routes to them, their references otherwise) and the shared post-processing."""
    grid = seed_grid(images.shape[2], images.shape[3], n_segments)
    clusters = iterate_triton(to_lab(images, lab), grid, compactness, n_iter)
    return finish(clusters, grid, n_segments, max_size_factor, min_size_factor)


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """One intra-op thread (as in test_segments.py): on a busy 2-core machine, OpenMP threads
    waiting for a core slow every small op down."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(params=KERNEL_DEVICES)
def device(request) -> str:
    """Tensor device of a kernel case ("cpu" for the interpreter)."""
    return kernel_device(request, INTERPRETED)


# (B, D, H, W, cell): odd sizes, cells that do not divide the image, 1x1 cells (every pixel a
# border pixel), a single cell (no neighbours at all) and a single row of cells.
CASES = {
    "b2_d5_20x20_cell6x7": (2, 5, 20, 20, (6, 7)),
    "b2_d5_17x23_cell5x4": (2, 5, 17, 23, (5, 4)),
    "b1_d3_5x6_cell1x1": (1, 3, 5, 6, (1, 1)),
    "b2_d4_7x9_one_cell": (2, 4, 7, 9, (7, 9)),
    "b2_d5_3x20_one_row": (2, 5, 3, 20, (3, 4)),
}


def _grid(h: int, w: int, cell) -> tuple[int, int]:
    return -(-h // cell[0]), -(-w // cell[1])


def _inputs(device, b, d, h, w, cell, *, strided=False, seed=0):
    """Random features (B, D, H, W) and centres (B, gh, gw, D); ``strided``: non-contiguous views."""
    g = torch.Generator().manual_seed(seed)
    gh, gw = _grid(h, w, cell)
    if strided:  # features from an (B, H, W, D) buffer, centres from a (B, D, gh, gw) one
        feats = torch.randn(b, h, w, d, generator=g).to(device).permute(0, 3, 1, 2)
        cents = torch.randn(b, d, gh, gw, generator=g).to(device).permute(0, 2, 3, 1)
    else:
        feats = torch.randn(b, d, h, w, generator=g).to(device)
        cents = torch.randn(b, gh, gw, d, generator=g).to(device)
    return feats, cents


def _candidates(feats, cents, cell) -> torch.Tensor:
    """Float64 brute force: (B, 9, H, W) squared distances to the 3x3 centres around every pixel's
    seeding cell, in raster slot order, +inf outside the grid."""
    b, d, h, w = feats.shape
    gh, gw = cents.shape[1], cents.shape[2]
    f, c = feats.double().cpu(), cents.double().cpu()
    cy, cx = torch.arange(h) // cell[0], torch.arange(w) // cell[1]
    out = []
    for k in range(9):
        ny, nx = cy + k // 3 - 1, cx + k % 3 - 1
        inside = ((ny >= 0) & (ny < gh)).view(h, 1) & ((nx >= 0) & (nx < gw)).view(1, w)
        near = c[:, ny.clamp(0, gh - 1)][:, :, nx.clamp(0, gw - 1)]  # (B, H, W, D)
        dist = ((f.permute(0, 2, 3, 1) - near) ** 2).sum(-1)
        out.append(dist.masked_fill(~inside, float("inf")))
    return torch.stack(out, 1)


def _slot_to_label(slot: torch.Tensor, h: int, w: int, cell, gw: int) -> torch.Tensor:
    cy = (torch.arange(h) // cell[0]).view(h, 1)
    cx = (torch.arange(w) // cell[1]).view(1, w)
    return (cy + slot // 3 - 1) * gw + cx + slot % 3 - 1


def _check_assign(feats, cents, cell, exact: bool) -> tuple[torch.Tensor, torch.Tensor]:
    labels, dist = K.assign(feats, cents, cell)
    ref_l, ref_d = assign_torch(feats, cents, cell)
    assert labels.dtype == ref_l.dtype == torch.int32 and dist.dtype == ref_d.dtype == torch.float32
    assert labels.shape == dist.shape == feats.shape[:1] + feats.shape[2:]
    assert labels.device == feats.device and labels.is_contiguous() and dist.is_contiguous()
    if exact:
        assert torch.equal(labels, ref_l)
        assert torch.equal(dist, ref_d)
    else:  # compiled: fused multiply-adds; labels where the reference's choice is clear
        torch.testing.assert_close(dist, ref_d, rtol=1e-5, atol=1e-5)
        top2 = _candidates(feats, cents, cell).topk(2, dim=1, largest=False).values
        clear = (top2[:, 1] - top2[:, 0] > 1e-4 * (1 + top2[:, 0])).to(labels.device)
        assert torch.equal(labels[clear], ref_l[clear])
        assert clear.float().mean() > 0.95
    return labels, dist


def _check_update(feats, labels, n, cell, *, exact_sums=False):
    sums, counts = K.update(feats, labels, n, cell)
    ref_s, ref_c = update_torch(feats, labels, n, cell)
    b, d = feats.shape[:2]
    assert sums.shape == ref_s.shape == (b, n, d) and counts.shape == ref_c.shape == (b, n)
    assert sums.dtype == torch.float32 and counts.dtype == ref_c.dtype == torch.int32
    assert torch.equal(counts, ref_c)
    if exact_sums:
        assert torch.equal(sums, ref_s)
    else:
        torch.testing.assert_close(sums, ref_s, rtol=1e-5, atol=1e-4)
    return sums, counts


# ---------------------------------------------------------------- kernel cases (interp + cuda)


@pytest.mark.parametrize("case", list(CASES))
def test_assign_matches_reference(device, case):
    b, d, h, w, cell = CASES[case]
    feats, cents = _inputs(device, b, d, h, w, cell)
    _check_assign(feats, cents, cell, exact=device == "cpu")


def test_assign_strided_inputs(device):
    b, d, h, w, cell = CASES["b2_d5_17x23_cell5x4"]
    feats, cents = _inputs(device, b, d, h, w, cell, strided=True)
    assert not feats.is_contiguous() and not cents.is_contiguous()
    labels, dist = _check_assign(feats, cents, cell, exact=device == "cpu")
    same = K.assign(feats.contiguous(), cents.contiguous(), cell)
    assert torch.equal(labels, same[0]) and torch.equal(dist, same[1])


def test_assign_larger_grid_than_needed(device):
    """A centre grid larger than the image's cells: neighbours up to the grid's edge count."""
    feats, cents = _inputs(device, 2, 5, 11, 13, (4, 4))
    extra = torch.randn(2, 4, 5, 5, generator=torch.Generator().manual_seed(3)).to(device)
    extra[:, :3, :4] = cents  # 3 x 4 needed, 4 x 5 given
    _check_assign(feats, extra, (4, 4), exact=device == "cpu")


@pytest.mark.parametrize("case", list(CASES))
def test_update_matches_reference(device, case):
    """Centre sums of assign's labels, per-centre windows."""
    b, d, h, w, cell = CASES[case]
    feats, cents = _inputs(device, b, d, h, w, cell)
    gh, gw = _grid(h, w, cell)
    labels, _ = assign_torch(feats, cents, cell)  # = K.assign's (test_assign_*); cheaper here
    sums, counts = _check_update(feats, labels, gh * gw, cell)
    assert int(counts.sum()) == b * h * w
    # the seeding cells themselves (what SLIC starts from), as int64 labels broadcast over the batch
    seeds = ((torch.arange(h) // cell[0]).view(h, 1) * gw + torch.arange(w) // cell[1]).to(device)
    _, counts = _check_update(feats, seeds.expand(b, h, w), gh * gw, cell)
    assert bool((counts > 0).all())


def test_update_cells_ignores_labels_outside_the_window(device):
    """With ``cell``, a pixel counts only for the 3x3 centres around its seeding cell (and labels
    outside [0, n) never count): kernel and reference agree on that contract."""
    b, d, h, w, cell = CASES["b2_d5_20x20_cell6x7"]
    feats, _ = _inputs(device, b, d, h, w, cell)
    gh, gw = _grid(h, w, cell)
    labels = torch.randint(-1, gh * gw + 1, (b, h, w), generator=torch.Generator().manual_seed(1))
    labels = labels.to(device)
    _, counts = _check_update(feats, labels, gh * gw, cell)
    in_range = int(((labels >= 0) & (labels < gh * gw)).sum())
    assert int(counts.sum()) < in_range < b * h * w


def test_update_cells_deterministic_and_batch_invariant(device):
    """The per-centre reduction has no atomics: same bits run to run and image by image."""
    b, d, h, w, cell = CASES["b2_d5_17x23_cell5x4"]
    feats, cents = _inputs(device, b, d, h, w, cell)
    gh, gw = _grid(h, w, cell)
    labels, _ = assign_torch(feats, cents, cell)  # = K.assign's (test_assign_*); cheaper here
    sums, counts = K.update(feats, labels, gh * gw, cell)
    again = K.update(feats, labels, gh * gw, cell)
    assert torch.equal(sums, again[0]) and torch.equal(counts, again[1])
    # a fresh copy of image 1 (same alignment as a new batch, so the same compiled specialisation)
    one = K.update(feats[1:].clone(), labels[1:].clone(), gh * gw, cell)
    assert torch.equal(sums[1:], one[0]) and torch.equal(counts[1:], one[1])


def test_slic_triton_kernels_vs_references(device, monkeypatch):
    """The whole slic_triton pipeline through the kernels (backend routing forced on for the
    interpreter) against the same pipeline through the references."""
    images = torch.rand(2, 3, 18, 21, generator=torch.Generator().manual_seed(4)).to(device)
    kwargs = dict(n_segments=12, n_iter=3)
    monkeypatch.setattr(_backend, "use_triton", lambda x: False)
    ref = slic_triton(images, **kwargs)
    calls = []
    real_assign, real_update = K.assign, K.update
    monkeypatch.setattr(K, "assign", lambda *a: calls.append("assign") or real_assign(*a))
    monkeypatch.setattr(K, "update", lambda *a: calls.append("update") or real_update(*a))
    monkeypatch.setattr(_backend, "use_triton", lambda x: True)
    out = slic_triton(images, **kwargs)
    assert calls.count("assign") == 3 and calls.count("update") == 3  # seeding + 2 updates
    assert out.dtype == torch.long and out.shape == (2, 18, 21) and out.device == images.device
    if device == "cpu":
        assert torch.equal(out, ref)
    else:
        assert (out == ref).float().mean() > 0.9


# ---------------------------------------------------------------- CUDA only


@pytest.mark.cuda
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device")
def test_backend_uses_kernels_on_cuda(monkeypatch):
    if INTERPRETED:
        pytest.skip("the cuda cases check the compiled kernels; this process interprets them")
    monkeypatch.delenv("TORCHLIME_BACKEND", raising=False)
    b, d, h, w, cell = CASES["b2_d5_20x20_cell6x7"]
    feats, cents = _inputs("cuda", b, d, h, w, cell)
    calls = []
    real_assign, real_update = K.assign, K.update
    monkeypatch.setattr(K, "assign", lambda *a: calls.append(1) or real_assign(*a))
    monkeypatch.setattr(K, "update", lambda *a: calls.append(2) or real_update(*a))
    labels, dist = _backend.slic_assign(feats, cents, cell)
    torch.testing.assert_close(dist, assign_torch(feats, cents, cell)[1], rtol=1e-5, atol=1e-5)
    sums, counts = _backend.slic_update(feats, labels, cents.shape[1] * cents.shape[2], cell)
    ref = update_torch(feats, labels, cents.shape[1] * cents.shape[2], cell)
    torch.testing.assert_close(sums, ref[0], rtol=1e-5, atol=1e-4)
    assert torch.equal(counts, ref[1]) and calls == [1, 2]
    monkeypatch.setenv("TORCHLIME_BACKEND", "torch")  # disabled: references
    _backend.slic_assign(feats, cents, cell)
    assert calls == [1, 2]


@pytest.mark.cuda
@pytest.mark.skipif(not HAS_CUDA or torch.cuda.device_count() < 2, reason="needs two CUDA devices")
def test_kernels_run_on_the_tensors_device():
    """Triton launches on the current device: tensors on cuda:1 while cuda:0 is current must still
    be processed on cuda:1 (each launch makes their device current)."""
    if INTERPRETED:
        pytest.skip("the cuda cases check the compiled kernels; this process interprets them")
    b, d, h, w, cell = CASES["b2_d5_20x20_cell6x7"]
    feats, cents = _inputs("cuda:1", b, d, h, w, cell)
    n = cents.shape[1] * cents.shape[2]
    with torch.cuda.device(0):
        labels, dist = K.assign(feats, cents, cell)
        sums, counts = K.update(feats, labels, n, cell)
        torch.cuda.synchronize(1)
    assert labels.device == sums.device == torch.device("cuda:1")
    torch.testing.assert_close(dist, assign_torch(feats, cents, cell)[1], rtol=1e-5, atol=1e-5)
    ref = update_torch(feats, labels, n, cell)
    torch.testing.assert_close(sums, ref[0], rtol=1e-5, atol=1e-4)
    assert torch.equal(counts, ref[1])


@pytest.mark.cuda
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device")
def test_slic_triton_on_cuda():
    """Valid, deterministic, batch-invariant labels close to segments.slic's on a GPU."""
    if INTERPRETED:
        pytest.skip("the cuda cases check the compiled kernels; this process interprets them")
    g = torch.Generator().manual_seed(5)
    images = torch.nn.functional.interpolate(
        torch.rand(3, 3, 12, 12, generator=g), size=(64, 80), mode="bilinear", align_corners=False
    ).cuda()
    out = slic_triton(images, n_segments=30)
    _assert_valid(out.cpu())
    assert torch.equal(out, slic_triton(images, n_segments=30))
    for i in range(3):
        assert torch.equal(out[i], slic_triton(images[i : i + 1], n_segments=30)[0])
    cpu = slic(images.cpu(), n_segments=30)
    same_cut = (_cuts(out.cpu()) == _cuts(cpu)).float().mean()
    assert same_cut > 0.95, same_cut


# ---------------------------------------------------------------- interpreter child process


def test_interpreter_cases_in_child_process(request):
    """Runs the selected ``[interp]`` cases in ``python -m pytest`` with TRITON_INTERPRET=1."""
    run_interp_cases_in_child(request, INTERPRETED)


# ---------------------------------------------------------------- no device needed


def _cuts(labels: torch.Tensor) -> torch.Tensor:
    """Whether each pixel's right / lower neighbour has another label: (B, 2, H, W)."""
    right = torch.zeros_like(labels, dtype=torch.bool)
    down = torch.zeros_like(labels, dtype=torch.bool)
    right[:, :, :-1] = labels[:, :, :-1] != labels[:, :, 1:]
    down[:, :-1] = labels[:, :-1] != labels[:, 1:]
    return torch.stack((right, down), 1)


def _assert_valid(labels: torch.Tensor) -> None:
    """Long (B, H, W), labels 0..F-1 per image, each label one 4-connected region (flood fill)."""
    assert labels.dtype == torch.long
    for lab in labels.tolist():
        h, w = len(lab), len(lab[0])
        f = max(map(max, lab)) + 1
        assert sorted({v for row in lab for v in row}) == list(range(f))
        seen, regions = [[False] * w for _ in range(h)], 0
        for y0 in range(h):
            for x0 in range(w):
                if seen[y0][x0]:
                    continue
                regions += 1
                stack, seen[y0][x0] = [(y0, x0)], True
                while stack:
                    y, x = stack.pop()
                    for ny, nx in ((y - 1, x), (y + 1, x), (y, x - 1), (y, x + 1)):
                        if 0 <= ny < h and 0 <= nx < w and not seen[ny][nx] and lab[ny][nx] == lab[y][x]:
                            seen[ny][nx] = True
                            stack.append((ny, nx))
        assert regions == f


@pytest.mark.parametrize("case", list(CASES))
def test_assign_torch_is_first_argmin(case):
    """The reference against a float64 brute force: the nearest of the in-grid 3x3 centres."""
    b, d, h, w, cell = CASES[case]
    feats, cents = _inputs("cpu", b, d, h, w, cell)
    labels, dist = assign_torch(feats, cents, cell)
    cand = _candidates(feats, cents, cell)
    best, slot = cand.min(1)
    gw = cents.shape[2]
    assert torch.equal(labels.long(), _slot_to_label(slot, h, w, cell, gw))
    torch.testing.assert_close(dist.double(), best, rtol=1e-5, atol=1e-6)


def test_assign_torch_ties_and_overflow():
    """Equal distances go to the first slot in raster order; all-infinite keeps the own cell."""
    feats = torch.zeros(1, 3, 6, 6)
    cents = torch.zeros(1, 3, 3, 3)  # every centre at distance 0
    labels, dist = assign_torch(feats, cents, (2, 2))
    cy, cx = torch.arange(6) // 2, torch.arange(6) // 2
    first = (cy - (cy > 0).long()).view(6, 1) * 3 + (cx - (cx > 0).long())
    assert torch.equal(labels[0].long(), first) and not dist.any()
    labels, dist = assign_torch(feats + 1e30, cents, (2, 2))  # squares overflow to inf
    assert torch.equal(labels[0].long(), cy.view(6, 1) * 3 + cx) and torch.isinf(dist).all()


def test_update_torch_matches_loops():
    feats, _ = _inputs("cpu", 2, 3, 5, 7, (2, 3))
    labels = torch.randint(-1, 7, (2, 5, 7), generator=torch.Generator().manual_seed(6))
    sums, counts = update_torch(feats, labels, 9, (2, 3))  # a 3 x 3 grid of 2 x 3 cells
    exp_s, exp_c = torch.zeros(2, 9, 3, dtype=torch.float64), torch.zeros(2, 9, dtype=torch.long)
    for i in range(2):
        for y in range(5):
            for x in range(7):
                k = int(labels[i, y, x])
                if 0 <= k < 9 and abs(k // 3 - y // 2) <= 1 and abs(k % 3 - x // 3) <= 1:
                    exp_s[i, k] += feats[i, :, y, x].double()
                    exp_c[i, k] += 1
    assert torch.equal(counts.long(), exp_c)
    torch.testing.assert_close(sums.double(), exp_s, rtol=1e-6, atol=1e-6)
    # with cell (2, 3): a 3 x 3 grid; pixel (0, 0) may only go to centres 0, 1, 3, 4
    far = ((torch.arange(5) // 2).view(5, 1) * 3 + torch.arange(7) // 3).expand(2, 5, 7).clone()
    far[:, 0, 0] = 8
    _, counts = update_torch(feats, far, 9, (2, 3))
    assert counts[:, 8].tolist() == [1, 1] and int(counts.sum()) == 2 * (35 - 1)  # only (4, 6)


def test_slic_features_layout():
    colour = torch.rand(2, 3, 4, 5, dtype=torch.float64)
    f = slic_features(colour, 0.5)
    assert f.dtype == torch.float32 and f.shape == (2, 5, 4, 5) and f.is_contiguous()
    assert torch.equal(f[:, :3], colour.float())
    assert torch.equal(f[0, 3], (torch.arange(4.0) * 0.5).view(4, 1).expand(4, 5))
    assert torch.equal(f[1, 4], (torch.arange(5.0) * 0.5).view(1, 5).expand(4, 5))
    # the distance between a pixel and a centre is d_colour^2 + scale^2 d_xy^2
    assert torch.isclose(
        ((f[0, :, 3, 4] - f[0, :, 0, 0]) ** 2).sum(),
        ((colour[0, :, 3, 4] - colour[0, :, 0, 0]) ** 2).sum().float() + 0.25 * 25,
    )


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda f, c: assign_torch(f, c, (0, 2)), ValueError, r"cell sizes must be >= 1"),
        (lambda f, c: assign_torch(f, c, 3), TypeError, r"cell must be a pair of ints"),
        (lambda f, c: assign_torch(f, c, (2.0, 2)), TypeError, r"cell must be a pair of ints"),
        (lambda f, c: assign_torch(f, c[:, :2], (4, 4)), ValueError, r"does not cover"),
        (lambda f, c: assign_torch(f, c[..., :2], (4, 4)), ValueError, r"must be \(B, gh, gw, D\)"),
        (lambda f, c: assign_torch(f, c.double(), (4, 4)), TypeError, r"share a float dtype"),
        (
            lambda f, c: update_torch(f, torch.zeros(2, 9, 9, dtype=torch.long), 9, (4, 4)),
            ValueError,
            r"labels must be",
        ),
        (lambda f, c: update_torch(f, torch.zeros(2, 9, 9), 9, (4, 4)), ValueError, r"labels must be"),
        (lambda f, c: update_torch(f, torch.zeros(2, 10, 11, dtype=torch.long), 0, (4, 4)), ValueError, r"n_centres"),
        (
            lambda f, c: update_torch(f, torch.zeros(2, 10, 11, dtype=torch.long), 8, (4, 4)),
            ValueError,
            r"n_centres must be ceil\(H / sh\) \* ceil\(W / sw\) = 9",
        ),
    ],
)
def test_reference_argument_errors(call, error, match):
    feats, cents = _inputs("cpu", 2, 5, 10, 11, (4, 4))
    with pytest.raises(error, match=match):
        call(feats, cents)


def test_supports():
    feats, cents = _inputs("cpu", 2, 5, 10, 11, (4, 4))
    labels = torch.zeros(2, 10, 11, dtype=torch.long)
    assert K.supports_assign(feats, cents, (4, 4)) == INTERPRETED  # CPU only when interpreted
    assert K.supports_update(feats, labels, 9, (4, 4)) == INTERPRETED
    assert not K.supports_assign(feats.double(), cents.double(), (4, 4))  # float32 only
    assert not K.supports_update(feats.half(), labels, 9, (4, 4))
    assert not K.supports_assign(feats, cents, (1, 1))  # grid does not cover the image
    assert not K.supports_update(feats, labels, 8, (4, 4))
    with pytest.raises(ValueError):
        K.assign(feats.double(), cents.double(), (4, 4))
    with pytest.raises(ValueError, match="cell sizes"):
        K.update(feats, labels, 9, (0, 4))


def test_backend_uses_references_on_cpu(monkeypatch):
    """On CPU tensors the backend never calls the kernels; results are the references'."""

    def boom(*args):
        raise AssertionError("kernel called on CPU")

    monkeypatch.setattr(K, "assign", boom)
    monkeypatch.setattr(K, "update", boom)
    b, d, h, w, cell = CASES["b2_d5_17x23_cell5x4"]
    feats, cents = _inputs("cpu", b, d, h, w, cell)
    assert not _backend.use_triton(feats)
    labels, dist = _backend.slic_assign(feats, cents, cell)
    ref = assign_torch(feats, cents, cell)
    assert torch.equal(labels, ref[0]) and torch.equal(dist, ref[1])
    out = _backend.slic_update(feats, labels, cents.shape[1] * cents.shape[2], cell)
    ref = update_torch(feats, labels, cents.shape[1] * cents.shape[2], cell)
    assert torch.equal(out[0], ref[0]) and torch.equal(out[1], ref[1])


def test_seed_grid_like_slic():
    """seed_grid covers the image with non-empty cells (as segments.slic's seeding)."""
    for h, w, n in [(224, 224, 100), (37, 53, 100), (5, 4, 1000), (1, 1, 100), (64, 80, 30)]:
        step, sh, sw, gh, gw = seed_grid(h, w, n)
        assert (gh - 1) * sh < h <= gh * sh and (gw - 1) * sw < w <= gw * sw


@pytest.mark.parametrize(
    "shape, kwargs",
    [
        ((2, 3, 37, 53), {}),
        ((1, 1, 40, 30), {"compactness": 0.1}),
        ((2, 5, 32, 32), {"n_segments": 20, "compactness": 0.1}),
        ((1, 3, 5, 4), {"n_segments": 1000}),
        ((1, 3, 1, 1), {}),
    ],
)
def test_slic_triton_cpu_valid_and_close_to_slic(shape, kwargs):
    """On CPU slic_triton runs the references: valid labels, the same cuts as segments.slic up to
    argmin near-ties, deterministic, batch-invariant, input unchanged."""
    images = torch.rand(shape, generator=torch.Generator().manual_seed(0))
    before = images.clone()
    out = slic_triton(images, **kwargs)
    assert out.shape == (shape[0],) + shape[2:] and torch.equal(images, before)
    _assert_valid(out)
    assert (_cuts(out) == _cuts(slic(images, **kwargs))).float().mean() > 0.97
    assert torch.equal(out, slic_triton(images, **kwargs))
    assert torch.equal(out[-1:], slic_triton(images[-1:], **kwargs))


def test_slic_triton_sharp_edge():
    images = torch.zeros(2, 3, 32, 40)
    images[:, 0, :, :19] = 0.9
    images[:, 2, :, 19:] = 0.8
    images[1] = images[0].flip(-1)
    labels = slic_triton(images, n_segments=20)
    left = images[:, 0] > 0.5
    for b in range(2):
        for k in labels[b].unique():
            side = left[b][labels[b] == k]
            assert side.all() or not side.any()
