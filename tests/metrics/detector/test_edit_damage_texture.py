"""edit_damage's content normalisation (texture, the grain ratio)."""

from __future__ import annotations

import numpy as np
import pytest
import skimage.data
import torch
from scipy.ndimage import gaussian_filter

from banana100.metrics.engine.scorer import to_tensor
from banana100.metrics.detector import filters
from banana100.metrics.detector import model as ed


def _noise(a, sigma, seed=0, length=0.0):
    n = np.random.default_rng(seed).normal(size=a.shape[:2])
    if length:
        n = gaussian_filter(n, length)
        n /= n.std()
    return np.clip(a.astype(float) + sigma * n[..., None], 0, 255).round().astype(np.uint8)


def _grey(a):
    return np.repeat(a[..., None], 3, axis=2) if a.ndim == 2 else a


@pytest.fixture(scope="module")
def grass():
    return np.ascontiguousarray(_grey(skimage.data.grass()[:256, :256]))


def _components(images):
    m = ed.EditDamage()
    scores = m(torch.stack([to_tensor(a) for a in images]))
    return scores, m.last_components


def test_texture_is_low_on_noise_and_high_on_texture(grass):
    flat = np.full((256, 256, 3), 120, np.uint8)
    _, c = _components([_noise(flat, 4), grass])
    # white noise of 4 levels barely reaches the coarse band; grass fills it
    assert c["texture"][0] < 0.5 and c["texture"][1] > 5
    ratio = ed.grain_ratio(c["grain"], c["texture"])
    assert ratio[0] > 4 > ratio[1]


def test_clean_texture_scores_below_the_same_texture_with_noise_and_its_floor_counts_no_more_than_the_cap(grass):
    """Grass's own band-pass floor is 24 levels; uncapped it would count 24 units. Capped (min(grain, 8) / 1)
    and with texture accounting for most of the ratio, its grain term is far below that. Since the evenness
    refit (cap 8, unit 1; before: 6 and 1.5) it scores a little above 3 levels of white noise on a flat image
    (docs/edit-damage.md), so that is not asserted; and 4 levels of grain on grass raise its score only a
    little (the floor is at its cap)."""
    scores, c = _components([grass, _noise(grass, 4)])
    assert c["grain"][0] > 20
    one = {k: float(v[0]) for k, v in c.items()}
    assert ed.terms(one)["grain"] < c["grain"][0] / ed.GRAIN_ABS[1] / 2
    assert scores[1] > scores[0]


def test_flat_content_has_ratio_one_and_no_grain_term():
    uniform = np.full((128, 128, 3), 90, np.uint8)
    _, c = _components([uniform])
    assert float(ed.grain_ratio(c["grain"], c["texture"])[0]) == pytest.approx(1.0, abs=1e-3)
    # the ratio's excess is 0; the capped absolute floor reads the flat area's (rounding-level) floor
    assert ed.terms({k: float(v[0]) for k, v in c.items()})["grain"] == pytest.approx(0, abs=1e-3)


def test_no_nan_on_tiny_flat_clipped_and_synthetic_images():
    images = [np.zeros((64, 64, 3), np.uint8), np.full((64, 64, 3), 255, np.uint8),
              np.tile(np.arange(64, dtype=np.uint8)[None, :, None] * 4, (64, 1, 3)),
              (np.indices((64, 64)).sum(0) % 2 * 255).astype(np.uint8)[..., None].repeat(3, 2)]
    for a in images:
        scores, c = _components([a])
        assert torch.isfinite(scores).all() and all(torch.isfinite(v).all() for v in c.values())


def test_jpeg_does_not_raise_the_grain_term():
    from io import BytesIO

    from PIL import Image

    photo = np.ascontiguousarray(skimage.data.astronaut()[128:384, 128:384])
    out = [photo]
    for q in (70, 30):
        buf = BytesIO()
        Image.fromarray(photo).save(buf, "JPEG", quality=q)
        out.append(np.asarray(Image.open(buf).convert("RGB")))
    _, c = _components(out)
    g = [ed.terms({k: float(v[i]) for k, v in c.items()})["grain"] for i in range(3)]
    assert g[1] <= g[0] + 1e-9 and g[2] <= g[0] + 1e-9


def test_the_cpu_paths_equal_the_convolution_and_the_batch():
    """On CPU the Gaussians are sums of shifted copies (x10 faster than oneDNN's one-channel
    convolution) and a batch is measured image by image: both equal the plain batched
    convolution to float32 rounding."""
    import torch.nn.functional as F

    from banana100.metrics.engine.scorer import to_tensor
    from banana100.testing.images import chain_images

    x = torch.rand(2, 1, 70, 90) * 255
    for sigma in (0.5, 2.5, 6.0):
        k = filters.gauss_kernel(sigma, x.device, x.dtype)
        r = k.numel() // 2
        padded = F.pad(x, (r, r, 0, 0), mode="reflect")
        torch.testing.assert_close(filters.separable_taps(padded, k, -1), F.conv2d(padded, k.view(1, 1, 1, -1)), rtol=1e-5, atol=1e-4)
    m = ed.build()
    batch = torch.stack([to_tensor(a) for a in chain_images(3, 96)])
    torch.testing.assert_close(m(batch), m._measure(batch, at_points=False), rtol=1e-6, atol=1e-5)


def test_the_filter_summed_in_strips_of_rows_equals_whole_planes(monkeypatch):
    """separable_taps sums in strips of rows (STRIP_BYTES, for the cache): the same sums in the same order, so
    bit for bit the whole planes' numbers, along both axes, a batch, a last strip shorter than the others, and
    to float32 rounding the convolution's."""
    import torch.nn.functional as F

    x = torch.rand(2, 1, 61, 83) * 255
    k = filters.gauss_kernel(2.5, x.device, x.dtype)
    r = k.numel() // 2
    across, down = F.pad(x, (r, r, 0, 0), mode="reflect"), F.pad(x, (0, 0, r, r), mode="reflect")
    whole = filters.separable_taps(across, k, -1), filters.separable_taps(down, k, 2)
    monkeypatch.setattr(filters, "STRIP_BYTES", 2 * 83 * 4 * 7)  # 7 rows of the batch a strip: 61 = 8 x 7 + 5
    strips = filters.separable_taps(across, k, -1), filters.separable_taps(down, k, 2)
    assert all(torch.equal(a, b) for a, b in zip(whole, strips, strict=True))
    torch.testing.assert_close(strips[0], F.conv2d(across, k.view(1, 1, 1, -1)), rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(strips[1], F.conv2d(down, k.view(1, 1, -1, 1)), rtol=1e-5, atol=1e-4)
    with pytest.raises(ValueError, match="last two dimensions"):
        filters.separable_taps(x, k, 1)


def test_the_cast_s_two_by_two_means_are_avg_pool_s_numbers():
    """The cast reads 2x2 means (filters.means_2x2, for speed): bit for bit avg_pool2d's, odd sides cut as it cuts
    them, and a batch of three channels."""
    import torch.nn.functional as F

    for shape in [(1, 3, 64, 64), (2, 3, 131, 257), (1, 3, 7, 4)]:
        x = torch.rand(*shape) * 255
        assert torch.equal(filters.means_2x2(x), F.avg_pool2d(x, 2)), shape


def test_the_cpu_s_allocation_saving_forms_give_the_plain_forms_numbers():
    """On the CPU the detector avoids new planes and advanced indexing (for speed, bench_edit_damage): each such
    form gives bit for bit its plain form's numbers. The gaussian's first pass is written into the second's padded
    plane (F.pad's reflection; replicated when the rows are too few), `take` is indexing, `padded_difference` is
    F.pad of a difference, and a float64 sum through one reused plane (the lattice's) is sum(dtype=float64)'s. The
    detector's components before these forms were checked bit for bit the same on 18 varied images (both paths)."""
    import torch.nn.functional as F

    x = torch.rand(2, 1, 61, 83) * 255
    for sigma in (0.5, 2.5, 6.0):
        k = filters.gauss_kernel(sigma, x.device, x.dtype)
        r = k.numel() // 2
        plain = filters.separable_taps(F.pad(filters.separable_taps(F.pad(x, (r, r, 0, 0), mode="reflect"), k, -1),
                                        (0, 0, r, r), mode="reflect"), k, -2)
        assert torch.equal(filters.gauss(x, sigma), plain), sigma
    few = torch.rand(1, 1, 12, 83) * 255  # 12 rows, a radius of 18: replicated
    k = filters.gauss_kernel(6.0, few.device, few.dtype)
    plain = filters.separable_taps(F.pad(filters.separable_taps(F.pad(few, (18, 18, 0, 0), mode="reflect"), k, -1),
                                    (0, 0, 18, 18), mode="replicate"), k, -2)
    assert torch.equal(filters.gauss(few, 6.0), plain)
    with pytest.raises(ValueError, match="out has shape"):
        filters.separable_taps(x, k, -1, out=torch.empty(2, 1, 61, 5))
    flat = x.flatten()
    index = torch.randint(0, flat.numel(), (40, 11))
    assert torch.equal(filters.take(flat, index), flat[index])
    assert torch.equal(filters.padded_difference(x, -1, 2, 1), F.pad(x[..., 2:] - x[..., :-2], (1, 1, 0, 0)))
    assert torch.equal(filters.padded_difference(x, -2, 1, 0), F.pad(x[..., 1:, :] - x[..., :-1, :], (0, 0, 0, 1)))
    for shape in [(2, 64, 80), (1, 512, 512), (3, 17, 1000)]:
        plane = torch.randn(*shape) * 40
        buffer = torch.empty(shape, dtype=torch.float64)
        assert torch.equal(filters.float64_total(plane, buffer), plane.sum((1, 2), dtype=torch.float64)), shape
        assert torch.equal(filters.float64_total(plane * plane, buffer), (plane * plane).sum((1, 2), dtype=torch.float64))


@pytest.mark.parametrize("shape", [(64, 64), (65, 200), (200, 71), (256, 256)])
def test_the_statistics_read_at_edge_and_speckle_pixels_equal_the_whole_image_masks(grass, shape):
    """On CPU the crease, softness and speckle sums are read at the pixels they concern (the GPU's path
    computes them everywhere and masks): both give the same components on every kind of content, at
    the borders included (odd sizes, edges and specks touching the frame), batch of several images."""
    rng = np.random.default_rng(1)
    h, w = shape
    specks = np.full((h, w, 3), 90, np.uint8)
    specks[rng.integers(0, h, 300), rng.integers(0, w, 300)] = 255  # on the border too
    specks[:, :3] = 250  # a clipped stripe at the edge
    specks[20:22, 30:33] = 255  # clusters of as many strong pixels as isolated allows (6), and one more
    specks[40:42, 30:33] = 255
    specks[42, 31] = 255
    bars = np.zeros((h, w, 3), np.uint8)
    cols = np.arange(w) % 20
    bars[:, cols < 10], bars[:, cols >= 10] = 40, 200  # contours everywhere, both polarities,
    bars[:, cols == 13] = 120  # each with a crease beside it
    images = [np.ascontiguousarray(np.resize(grass, (h, w, 3))), _noise(np.full((h, w, 3), 128, np.uint8), 12),
              specks, bars, np.full((h, w, 3), 7, np.uint8)]
    x = torch.stack([to_tensor(a) for a in images])
    m = ed.EditDamage()
    dense = m._measure(x, at_points=False), dict(m.last_components)
    points = m._measure(x, at_points=True), dict(m.last_components)
    assert dense[1]["speckles"].tolist() == points[1]["speckles"].tolist()  # a count: exactly
    assert points[1]["speckles"][2] > 0 and points[1]["crease"][3] > 0  # the paths were exercised
    for name in dense[1]:
        torch.testing.assert_close(points[1][name], dense[1][name], rtol=1e-5, atol=1e-6, msg=name)
    torch.testing.assert_close(points[0], dense[0], rtol=1e-5, atol=1e-5)


def test_evenness_tells_grain_over_the_whole_image_from_a_floor_over_flatter_tiles(grass):
    """Grain an edit adds covers every tile: evenness near 1. A photograph's floor of its own detail sits over
    a few tiles flatter still (a patch of sky): evenness near 0, and the grain term is weighed by it."""
    flat = np.full((256, 256, 3), 120, np.uint8)
    patched = grass.copy()
    patched[16:64, 16:64] = 120  # 9 of 256 tiles flat (the filter reaches into those at its edge): the flattest 2 %
    _, c = _components([_noise(flat, 3), patched, _noise(patched, 3)])
    even = c["evenness"].tolist()
    # grain of 3 levels over the patch does not make grass's floor of 24 even, but it raises it
    assert even[0] > 0.85 and even[1] < 0.3 and even[2] > even[1]
    for i in range(3):
        one = {k: float(v[i]) for k, v in c.items()}
        unweighed = ed.term_tensors({k: torch.tensor([v], dtype=torch.float64) for k, v in one.items()}, even=False)["grain"]
        assert ed.terms(one)["grain"] == pytest.approx(float(unweighed[0]) * even[i])
    # grain added over the patched image raises its score more than its grain alone would say
    assert ed.terms({k: float(v[2]) for k, v in c.items()})["grain"] > ed.terms({k: float(v[1]) for k, v in c.items()})["grain"]


def test_evenness_is_one_where_there_is_no_floor_at_all():
    """A uniform image, a smooth gradient (rounding's energy only) and an all-white one have no floor to weigh."""
    ramp = np.repeat(np.linspace(40, 200, 128)[None, :, None], 128, axis=0).repeat(3, axis=2).round().astype(np.uint8)
    _, c = _components([np.full((128, 128, 3), 90, np.uint8), ramp, np.full((128, 128, 3), 255, np.uint8)])
    assert c["evenness"].tolist() == [1.0, 1.0, 1.0]


@pytest.mark.parametrize("tiles_shape", [(4, 4), (5, 9), (12, 7)])
def test_the_lattice_overlap_from_the_tiles_counts_the_pixel_pairs(tiles_shape):
    """The lattice's overlap (pixel pairs at each lag both in the flatter tiles) comes from the tiles'
    own autocorrelation: it equals the count over the pixel mask itself, exactly, at every lag read."""
    from scipy.signal import correlate

    rng = np.random.default_rng(sum(tiles_shape))
    tiles = torch.from_numpy(rng.random((2, *tiles_shape)) < 0.5).to(torch.float64)
    lag = min(ed.MAX_LAG, tiles_shape[0] * ed.TILE // 4, tiles_shape[1] * ed.TILE // 4)
    lags = torch.cat([torch.arange(0, lag + 1), torch.arange(-lag, 0)])
    got = ed.tile_overlap(tiles, lags)
    for b in range(2):
        pixels = np.kron(tiles[b].numpy(), np.ones((ed.TILE, ed.TILE)))
        full = np.rint(correlate(pixels, pixels, mode="full", method="fft"))  # integer counts: full[c + d]
        cy, cx = pixels.shape[0] - 1, pixels.shape[1] - 1
        want = full[np.ix_(cy + lags.numpy(), cx + lags.numpy())]
        np.testing.assert_array_equal(got[b].numpy(), want)
