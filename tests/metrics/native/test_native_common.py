"""The shared native primitives: MATLAB functions, NSS fits and the parameter-file readers."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from banana100.metrics.native import matlab, nss, params

torch.set_num_threads(min(2, torch.get_num_threads()))


def _image(seed: int, shape=(2, 1, 37, 53)) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, shape, generator=g).to(torch.float64)


# --------------------------------------------------------------------------- imresize


def test_imresize_matches_known_matlab_output():
    # MATLAB imresize(reshape(0:15, 4, 4)', [3 3]) as quoted in pyiqa's resize.py docstring, except
    # its 6.1505, a typo: the image is linear (4 * row + col), so the middle row sums to 2 * 7.5
    x = torch.arange(16, dtype=torch.float64).view(4, 4)
    expected = torch.tensor(
        [
            [0.7506, 2.1004, 3.4503],
            [6.1501, 7.5000, 8.8499],
            [11.5497, 12.8996, 14.2494],
        ],
        dtype=torch.float64,
    )
    assert torch.allclose(matlab.imresize(x, size=(3, 3)), expected, atol=1e-4)


def test_imresize_hand_computed_upscale():
    # x2 bicubic of [0, 10]: output centres at input coordinates 0.75, 1.25, 1.75, 2.25 (1-based),
    # borders mirrored; e.g. the first is 10 * (cubic(1.25) + cubic(0.75)) with cubic(1.25) < 0
    def cubic(t):
        t = abs(t)
        if t <= 1:
            return 1.5 * t**3 - 2.5 * t**2 + 1
        return -0.5 * t**3 + 2.5 * t**2 - 4 * t + 2 if t <= 2 else 0.0

    def value(
        i,
    ):  # [0, 10] extended symmetrically: ... 10 0 | 0 10 | 10 0 ... (1-based)
        return (0.0, 10.0, 10.0, 0.0)[(i - 1) % 4]

    out = matlab.imresize(torch.tensor([[0.0, 10.0]], dtype=torch.float64), size=(1, 4))
    expected = [
        sum(cubic(u - i) * value(i) for i in range(-3, 7))
        for u in (0.75, 1.25, 1.75, 2.25)
    ]
    assert torch.allclose(
        out[0], torch.tensor(expected, dtype=torch.float64), atol=1e-12
    )


@pytest.mark.integration
@pytest.mark.parametrize(
    "kwargs",
    [
        {"scale": 0.5},
        {"scale": 0.37},
        {"scale": 2.0},
        {"scale": 1.3},
        {"size": (524, 524)},
        {"size": (20, 61)},
    ],
)
def test_imresize_matches_pyiqa(kwargs):
    from pyiqa.matlab_utils import imresize as pyiqa_imresize

    x = _image(1, (2, 3, 37, 53))
    ours = matlab.imresize(x, **kwargs)
    pk = dict(kwargs)
    if "size" in pk:
        pk["sizes"] = pk.pop("size")
    theirs = pyiqa_imresize(x, **pk)  # computed in float32 by pyiqa
    assert ours.shape == theirs.shape
    assert (ours - theirs).abs().max() < 3e-3


def test_imresize_banded_equals_matrix_product():
    # CPU applies the weight matrices in banded form; other devices multiply by them
    x = _image(4, (2, 1, 50, 41))
    cases = (
        ({"scale": 0.5}, (25, 21), (0.5, 0.5)),
        ({"size": (77, 19)}, (77, 19), (77 / 50, 19 / 41)),
    )
    for kwargs, (oh, ow), (sh, sw) in cases:
        mh = matlab.resize_matrix(50, oh, sh, True, x.device, x.dtype)
        mw = matlab.resize_matrix(41, ow, sw, True, x.device, x.dtype)
        assert torch.allclose(
            matlab.imresize(x, **kwargs), mh @ x @ mw.t(), rtol=0, atol=1e-11
        )


def test_imresize_size_rule_constant_and_batch():
    x = _image(2, (3, 1, 37, 53))
    assert matlab.imresize(x, scale=0.5).shape[-2:] == (19, 27)  # ceil, as MATLAB
    const = torch.full((1, 1, 11, 13), 77.0, dtype=torch.float64)
    assert torch.allclose(
        matlab.imresize(const, scale=0.37),
        torch.full((1, 1, 5, 5), 77.0, dtype=torch.float64),
    )
    batched = matlab.imresize(x, scale=0.5)
    one = torch.cat([matlab.imresize(x[i : i + 1], scale=0.5) for i in range(3)])
    assert torch.allclose(batched, one, rtol=0, atol=1e-12)


def test_imresize_uint8_rounds_after_each_pass_smaller_scale_first():
    x = _image(3, (1, 1, 40, 30))
    out = matlab.imresize(x, size=(31, 12), uint8=True)
    assert torch.equal(out, out.round()) and out.min() >= 0 and out.max() <= 255
    # MATLAB resizes the axis with the smaller scale first (width: 12/30 < 31/40), rounding after each pass
    w_only = matlab.to_uint8(matlab.imresize(x, size=(40, 12)))
    expected = matlab.to_uint8(matlab.imresize(w_only, size=(31, 12)))
    assert torch.equal(out, expected)


def test_imresize_rejects_bad_arguments():
    x = torch.zeros(4, 4, dtype=torch.float64)
    with pytest.raises(ValueError):
        matlab.imresize(x)
    with pytest.raises(ValueError):
        matlab.imresize(x, scale=0.5, size=(2, 2))


# --------------------------------------------------------------------------- colour


def test_rgb2gray_matlab_coefficients_and_rounding():
    rgb = _image(4, (2, 3, 5, 7))
    gray = matlab.rgb2gray(rgb)
    r, g, b = rgb[:, 0:1], rgb[:, 1:2], rgb[:, 2:3]
    exact = 0.298936021293775 * r + 0.587043074451121 * g + 0.114020904255103 * b
    assert torch.equal(gray, torch.floor(exact + 0.5))
    assert torch.allclose(matlab.rgb2gray(rgb, uint8=False), exact)
    # a grey pixel keeps its value
    grey = torch.full((1, 3, 2, 2), 200.0, dtype=torch.float64)
    assert torch.equal(
        matlab.rgb2gray(grey), torch.full((1, 1, 2, 2), 200.0, dtype=torch.float64)
    )


def test_round_half_away_from_zero():
    x = torch.tensor([-2.5, -0.5, 0.5, 1.5, 2.5], dtype=torch.float64)
    assert matlab.round_half_away(x).tolist() == [-3.0, -1.0, 1.0, 2.0, 3.0]
    assert matlab.to_uint8(
        torch.tensor([-3.0, 254.5, 300.0], dtype=torch.float64)
    ).tolist() == [0.0, 255.0, 255.0]


@pytest.mark.integration
@pytest.mark.parametrize("space", ["yiq", "ycbcr"])
def test_pyiqa_y_channel_is_bit_exact(space):
    from pyiqa.utils.color_util import to_y_channel

    x = (_image(5, (2, 3, 31, 17)) / 255).to(torch.float32)
    assert torch.equal(
        matlab.pyiqa_y_channel(x, space), to_y_channel(x, 255, space).to(torch.float64)
    )


@pytest.mark.integration
@pytest.mark.parametrize("space", ["yiq", "ycbcr"])
def test_pyiqa_y_channel_matches_pyiqa_on_every_rgb_triple(space):
    """The CPU path multiplies by the Y column alone; every pixel value that can reach it (the
    2^24 uint8 triples: batches of two 1024x1024 images, each of 16 red levels) must round as
    pyiqa's 3-column product does (a value on .5 goes up or down by the float32 arithmetic)."""
    from pyiqa.utils.color_util import to_y_channel

    levels = torch.arange(256)
    red, green, blue = torch.meshgrid(torch.arange(32), levels, levels, indexing="ij")
    for red0 in range(0, 256, 32):
        rgb = torch.stack([red + red0, green, blue]).reshape(3, 2, 1024, 1024).transpose(0, 1)
        x = rgb.to(torch.float32) / 255
        ours, theirs = matlab.pyiqa_y_channel(x, space), to_y_channel(x, 255, space).to(torch.float64)
        assert torch.equal(ours, theirs), (space, red0, int((ours != theirs).sum()))
        if red0 == 0 and space == "yiq":
            # the check can fail: the same sum in float64 rounds some ties the other way
            exact = sum(w * x[:, c : c + 1].double() for c, w in enumerate(matlab.YIQ_Y))
            assert (torch.round(exact * 255) != theirs).any()


# --------------------------------------------------------------------------- filtering


@pytest.mark.integration
def test_fspecial_gaussian():
    from pyiqa.matlab_utils import fspecial

    k = matlab.fspecial_gaussian(7, 7 / 6)
    assert abs(k.sum().item() - 1) < 1e-15
    assert torch.equal(
        matlab.fspecial_gaussian(7, 7 / 6, float32=True),
        fspecial(7, 7 / 6).double()[0, 0],
    )
    g = matlab.gaussian_1d(7, 7 / 6)
    assert torch.allclose(torch.outer(g, g), k, atol=1e-16)


@pytest.mark.parametrize(
    "padding, scipy_mode",
    [
        ("zeros", "constant"),
        ("replicate", "nearest"),
        ("symmetric", "reflect"),
        ("circular", "wrap"),
    ],
)
def test_imfilter_paddings_match_scipy(padding, scipy_mode):
    import scipy.ndimage

    x = _image(6, (1, 1, 12, 9))
    k = torch.rand(
        5, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0)
    )
    ours = matlab.imfilter(x, k, padding)[0, 0].numpy()
    theirs = scipy.ndimage.correlate(x[0, 0].numpy(), k.numpy(), mode=scipy_mode)
    assert np.allclose(ours, theirs, atol=1e-10)


def test_filter2_and_conv2_match_scipy():
    import scipy.signal

    x = _image(7, (13, 11))
    k = torch.rand(
        5, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(1)
    )
    assert np.allclose(
        matlab.filter2_same(k, x).numpy(),
        scipy.signal.correlate2d(x.numpy(), k.numpy(), mode="same"),
    )
    assert np.allclose(
        matlab.conv2_same(x, k).numpy(),
        scipy.signal.convolve2d(x.numpy(), k.numpy(), mode="same"),
    )


@pytest.mark.parametrize("padding", ["zeros", "replicate"])
def test_integer_filtering_is_bit_exact(padding):
    x = _image(8, (2, 1, 60, 75))
    x[..., :20, :30] = 255  # flat areas, where only exact arithmetic agrees
    x[..., 30:, :10] = 0
    k = matlab.fspecial_gaussian(7, 7 / 6, float32=True)
    mu, mean_sq = matlab.imfilter_moments_integer(x, k, padding)
    assert torch.equal(mu, matlab.imfilter(x, k, padding))
    assert torch.equal(mean_sq, matlab.imfilter(x * x, k, padding))
    assert torch.equal(matlab.imfilter_integer(x * x, k, padding, 65025), mean_sq)
    # a float64 or an asymmetric kernel is not filtered this way: the plain filter instead
    for other in (matlab.fspecial_gaussian(7, 7 / 6), k[:, :5].contiguous()):
        assert torch.equal(
            matlab.imfilter_integer(x, other, padding, 255),
            matlab.imfilter(x, other, padding),
        )


def test_near_separable_filtering_keeps_kernel_values():
    x = _image(9, (2, 1, 40, 50)) + 0.25
    k = matlab.fspecial_gaussian(7, 7 / 6, float32=True)
    ours = matlab.imfilter_near_separable(x, k, "replicate")
    assert (ours - matlab.imfilter(x, k, "replicate")).abs().max() < 1e-11
    # on a flat area the deviation from the value is kernel.sum() - 1 (about 1e-8), not rounding noise
    flat = torch.full((1, 1, 20, 20), 100.0, dtype=torch.float64)
    dev = matlab.imfilter_near_separable(flat, k, "replicate") - 100.0
    assert torch.allclose(
        dev, torch.full_like(dev, 100.0 * (k.sum().item() - 1)), rtol=1e-4
    )


# --------------------------------------------------------------------------- NSS


@pytest.mark.integration
def test_ggd_aggd_match_pyiqa():
    from pyiqa.archs.func_util import estimate_aggd_param, estimate_ggd_param

    g = torch.Generator().manual_seed(3)
    x = torch.randn(6, 1, 30, 40, generator=g, dtype=torch.float64) * torch.linspace(
        0.2, 3, 6, dtype=torch.float64
    ).view(6, 1, 1, 1)
    x = torch.sign(x) * x.abs().pow(
        torch.linspace(0.5, 2, 6, dtype=torch.float64).view(6, 1, 1, 1)
    )
    x[3] = x[3].clamp(min=-0.3)  # asymmetric
    alpha, left, right = (t.reshape(-1) for t in nss.estimate_aggd(x.flatten(-2)))
    p_alpha, p_left, p_right = estimate_aggd_param(x, return_sigma=True)
    assert torch.allclose(alpha, p_alpha.reshape(-1), atol=1e-9)
    assert torch.allclose(left, p_left.reshape(-1)) and torch.allclose(
        right, p_right.reshape(-1)
    )
    g_alpha, mean_sq = (t.reshape(-1) for t in nss.estimate_ggd(x.flatten(-2)))
    p_galpha, p_sigma = estimate_ggd_param(x)
    assert torch.allclose(g_alpha, p_galpha.reshape(-1), atol=1e-9)
    assert torch.allclose(mean_sq, p_sigma.reshape(-1) ** 2)


def test_aggd_without_negative_values_is_nan_like_matlab():
    alpha, left, right = nss.estimate_aggd(torch.zeros(2, 50, dtype=torch.float64))
    assert alpha.tolist() == [
        0.2,
        0.2,
    ]  # MATLAB's min of an all-NaN vector: the first position
    assert torch.isnan(left).all() and torch.isnan(right).all()


@pytest.mark.integration
def test_paired_products_blocks_and_nan_statistics():
    x = torch.randn(2, 3, 8, 10, dtype=torch.float64)
    for shifts in (nss.NIQE_SHIFTS, nss.BRISQUE_SHIFTS):
        expected = torch.stack(
            [x * torch.roll(x, s, dims=(-2, -1)) for s in shifts], dim=-3
        )
        assert torch.equal(nss.paired_products(x, shifts), expected)
    b = nss.blocks(
        torch.arange(24.0).view(4, 6), 2, 3
    )  # 2x2 blocks listed column by column
    assert (
        b.shape == (4, 2, 3) and b[1, 0, 0].item() == 12.0 and b[2, 0, 0].item() == 3.0
    )

    from pyiqa.matlab_utils import nancov, nanmean

    feats = torch.randn(2, 9, 4, dtype=torch.float64)
    feats[0, 2, 1] = float("nan")
    feats[1, 5, 3] = float("nan")
    assert torch.allclose(nss.nanmean_rows(feats), nanmean(feats, dim=1))
    assert torch.allclose(nss.nancov_rows(feats), nancov(feats))
    assert torch.equal(
        nss.nancov_rows(feats[:, :1]), torch.zeros(2, 4, 4, dtype=torch.float64)
    )


# --------------------------------------------------------------------------- parameter files


def test_read_live_brisque_files(iqa_params):
    model = params.read_libsvm_model(iqa_params / "brisque_live_allmodel")
    assert model.support_vectors.shape == (774, 36)
    assert model.gamma == 0.05 and model.rho == -153.591
    ranges = params.read_libsvm_range(iqa_params / "brisque_live_allrange")
    assert (ranges.lower, ranges.upper) == (-1.0, 1.0) and ranges.feature_min.shape == (
        36,
    )
    assert ranges.feature_min[22] == 1.5e-5 and ranges.feature_max[0] == 10
    # the same model pyiqa loads (its float32 conversion of allmodel)
    coef, sv = torch.load(iqa_params / "brisque_svm_weights.pth", weights_only=False)
    assert np.allclose(model.coef, coef.double().numpy(), rtol=1e-6)
    assert np.allclose(model.support_vectors, sv.double().numpy(), rtol=1e-6, atol=1e-7)


def test_read_niqe_mat(iqa_params):
    mu, cov = params.read_niqe_mat(iqa_params / "niqe_modelparameters.mat")
    assert mu.shape == (36,) and cov.shape == (36, 36) and np.allclose(cov, cov.T)


MODEL_HEAD = "svm_type epsilon_svr\nkernel_type rbf\ngamma 0.05\nnr_class 2\ntotal_sv 2\nrho -1.5\nSV\n"


@pytest.mark.parametrize(
    "text, message",
    [
        ("svm_type epsilon_svr\nkernel_type rbf\n", "no 'SV' line"),
        (MODEL_HEAD.replace("epsilon_svr", "c_svc"), "expected 'epsilon_svr'"),
        (MODEL_HEAD.replace("rbf", "linear"), "expected 'rbf'"),
        (MODEL_HEAD.replace("gamma 0.05\n", ""), "no 'gamma'"),
        (MODEL_HEAD + "1 1:0.5 2:0.1\n", "total_sv 2 but 1"),
        (
            MODEL_HEAD + "1 1:0.5 2:0.1\n-1 1:x 2:0.2\n",
            "line 9: value of feature 1 'x'",
        ),
        (MODEL_HEAD + "1 1:0.5 2:0.1\n-1 1-0.2\n", "not an index:value pair"),
        (MODEL_HEAD + "one 1:0.5\n-1 1:0.2\n", "coefficient 'one'"),
    ],
)
def test_malformed_libsvm_model(tmp_path, text, message):
    path = tmp_path / "allmodel"
    path.write_text(text)
    with pytest.raises(params.ParameterFileError, match=message) as err:
        params.read_libsvm_model(path)
    assert str(path) in str(err.value) and isinstance(err.value, ValueError)


def test_small_libsvm_model_reads(tmp_path):
    path = tmp_path / "allmodel"
    path.write_text(MODEL_HEAD + "1 1:0.5 3:0.1\n-1 2:0.2\n")
    model = params.read_libsvm_model(path)
    assert model.support_vectors.tolist() == [[0.5, 0.0, 0.1], [0.0, 0.2, 0.0]]
    assert model.coef.tolist() == [1.0, -1.0] and model.rho == -1.5


@pytest.mark.parametrize(
    "text, message",
    [
        ("y\n-1 1\n1 0 1\n", "first line must be 'x'"),
        ("x\n-1\n1 0 1\n", "second line must be 'lower upper'"),
        ("x\n-1 1\n1 0 1\n3 0 1\n", "not 1..3 without gaps"),
        ("x\n-1 1\n1 0 one\n", "maximum 'one' is not a number"),
        ("x\n-1 1\n1 0\n", "expected 'index min max'"),
    ],
)
def test_malformed_range_file(tmp_path, text, message):
    path = tmp_path / "allrange"
    path.write_text(text)
    with pytest.raises(params.ParameterFileError, match=message) as err:
        params.read_libsvm_range(path)
    assert str(path) in str(err.value)


def test_bad_niqe_mat_and_missing_files(tmp_path):
    import scipy.io

    wrong = tmp_path / "wrong.mat"
    scipy.io.savemat(wrong, {"mu_prisparam": np.zeros((1, 36))})
    with pytest.raises(params.ParameterFileError, match="no variable 'cov_prisparam'"):
        params.read_niqe_mat(wrong)
    shape = tmp_path / "shape.mat"
    scipy.io.savemat(
        shape, {"mu_prisparam": np.zeros((1, 36)), "cov_prisparam": np.zeros((35, 36))}
    )
    with pytest.raises(params.ParameterFileError, match="expected \\(36, 36\\)"):
        params.read_niqe_mat(shape)
    junk = tmp_path / "junk.mat"
    junk.write_bytes(b"not a mat file at all" * 10)
    with pytest.raises(params.ParameterFileError, match="junk.mat"):
        params.read_niqe_mat(junk)
    for reader in (
        params.read_niqe_mat,
        params.read_libsvm_model,
        params.read_libsvm_range,
    ):
        with pytest.raises(params.ParameterFileError, match="file not found"):
            reader(tmp_path / "absent")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("kernel", [(7, 7), (5, 5), (7, 1), (1, 7), (3, 3)])
@pytest.mark.parametrize("groups", [1, 2])
def test_cpu_convolution_in_strips_equals_one_call_bit_for_bit(dtype, kernel, groups):
    """matlab.conv2d cuts CPU batches into images and images into row strips, for speed only:
    each image must come out as from a call of its own (what pyiqa makes, one image at a time)."""
    gen = torch.Generator().manual_seed(1)
    weight = torch.rand(groups, 1, *kernel, generator=gen, dtype=dtype)
    for h, w in ((70, 90), (300, 1030), (1030, 1030)):
        x = (torch.rand(2, groups, h, w, generator=gen, dtype=dtype) * 255).round()
        alone = torch.cat([F.conv2d(x[i : i + 1], weight, groups=groups) for i in range(len(x))])
        assert torch.equal(matlab.conv2d(x, weight, groups), alone), (h, w)
