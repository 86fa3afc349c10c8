"""VisualQuality-R1 (banana100.metrics.vlm.scorer) on a tiny random Qwen2.5-VL built offline, on CPU.

The random model answers gibberish: that exercises the parse-error path for real. The scoring
path from a parsed answer is checked by a scorer whose `generate` returns fixed answers.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("transformers")

from banana100.errors import AnswerParseError, ScoreUndefinedError, UsageError, WeightsNotFoundError  # noqa: E402
from banana100.metrics.vlm import scorer as vlm  # noqa: E402
from banana100.metrics.table import EVALUATORS, get_metric  # noqa: E402
from banana100.testing.tiny_qwen import tiny_model, tiny_processor  # noqa: E402


@pytest.fixture(scope="module")
def tiny():
    processor = tiny_processor()
    return tiny_model(processor), processor


def _images(n=4, seed=0):
    """Images of different sizes, so a batch needs padding (their prompts differ in length)."""
    rng = np.random.default_rng(seed)
    sizes = [(56, 84), (84, 84), (112, 56), (60, 90), (90, 150)][:n]
    return [rng.integers(0, 256, (h, w, 3), dtype=np.uint8) for h, w in sizes]


def _scorer(tiny, **kw):
    model, processor = tiny
    kw = {"device": "cpu", "max_pixels": 112 * 112, "max_new_tokens": 12, **kw}
    return vlm.VLMScorer(model=model, processor=processor, **kw)


def test_table_entry():
    spec = get_metric("visualquality_r1")
    assert spec.score_range == (1, 5) and not spec.lower_better
    assert spec.backends == ("transformers",) and spec.extra == "vlm"
    [wf] = spec.files
    assert wf.repo_id == "TianheWu/VisualQuality-R1-7B" and wf.snapshot and "MIT" in wf.licence
    assert EVALUATORS["rali"].status == "unavailable"


@pytest.mark.parametrize("text, score", [
    ("<answer>3.52</answer>", 3.52),
    ("<answer> 4 </answer>", 4.0),
    ("<think>blurry, 2 faces</think><answer>1.75</answer>", 1.75),
    ("<answer>2.00</answer> then <answer>4.25</answer>", 4.25),  # the last answer, as the authors parse
    ("3.10", 3.10),
])
def test_parse_answer(text, score):
    assert vlm.parse_answer(text) == pytest.approx(score)


@pytest.mark.parametrize("text", ["", "The quality is good.", "<answer>good</answer>", "<answer>7.5</answer>",
                                  "<answer>0.2</answer>", "score 3.5 maybe", "<answer>3.5"])
def test_parse_answer_refuses(text):
    with pytest.raises(ValueError):
        vlm.parse_answer(text)


def test_left_padding_and_pinned_size(tiny):
    s = _scorer(tiny)
    assert s.processor.tokenizer.padding_side == "left"
    batch = s.inputs(_images(3))
    pad = s.processor.tokenizer.pad_token_id
    ids, mask = batch["input_ids"], batch["attention_mask"]
    assert (mask[:, -1] == 1).all()  # every prompt ends at the last position: generation follows it
    assert (ids[mask == 0] == pad).all() and (mask == 0).any()
    # each image's area at most max_pixels (grid in 14-px patches)
    for t, h, w in batch["image_grid_thw"].tolist():
        assert h * 14 * w * 14 <= s.max_pixels
    assert "max_pixels=12544" in s.mode


def test_batched_equals_one_by_one(tiny):
    images = _images(5)
    names = [f"i{k}" for k in range(len(images))]
    batched = _scorer(tiny, batch_size=5, keep_text=True).measure(images, names)
    singles = _scorer(tiny, batch_size=1, keep_text=True).measure(images, names)
    assert batched.errors and singles.errors
    assert batched.texts == singles.texts
    assert len(set(batched.texts)) > 1  # the images got different answers: a real comparison


def test_unparsable_answer_is_a_named_error_not_a_score(tiny):
    s = _scorer(tiny, batch_size=2)
    with pytest.raises(ScoreUndefinedError) as info:
        s.score_arrays(_images(3), names=["a.png", "b.png", "c.png"])
    err = info.value
    assert err.scores == [None, None, None]
    assert all(isinstance(e, AnswerParseError) for e in err.errors.values())
    assert "a.png" in str(err.errors[0]) and "gave no score" in str(err.errors[0])
    assert s.measure(_images(3), ["a.png", "b.png", "c.png"]).texts == [None, None, None]  # keep_text off


class _Answers(vlm.VLMScorer):
    """The real scorer with fixed answers in place of the model's (the path after generate)."""

    answers: dict

    def generate(self, arrays):
        return [self.answers[a.shape[:2]] for a in arrays]


def test_scores_in_input_order_with_one_failure(tiny):
    model, processor = tiny
    images = _images(3)
    s = _Answers(model=model, processor=processor, device="cpu", batch_size=2, keep_text=True)
    s.answers = {images[0].shape[:2]: "<answer>3.25</answer>", images[1].shape[:2]: "I cannot rate this",
                 images[2].shape[:2]: "<answer>1.50</answer>"}
    with pytest.raises(ScoreUndefinedError) as info:
        s.score_arrays(images)
    assert info.value.scores == [3.25, None, 1.5]
    assert list(info.value.errors) == [1]
    assert s.measure(images, ["a", "b", "c"]).texts[1] == "I cannot rate this"
    s.answers[images[1].shape[:2]] = "<answer>4.00</answer>"
    assert s.score_arrays(images) == [3.25, 4.0, 1.5]


def test_too_small_and_bad_options(tiny):
    from banana100.errors import ImageTooSmallError

    s = _scorer(tiny)
    with pytest.raises(ImageTooSmallError, match="28x28"):
        s.score_arrays([np.zeros((20, 40, 3), np.uint8)])
    with pytest.raises(UsageError, match="max_pixels"):
        _scorer(tiny, max_pixels=1000)


def test_default_size_keeps_2k_at_full_size():
    # 2048 is not a multiple of 28: each side is rounded to 2044 (73 merged patches), not shrunk
    assert vlm.visual_tokens(2048, 2048) == 73 * 73
    assert vlm.visual_tokens(4096, 4096) * 28 * 28 <= vlm.DEFAULT_MAX_PIXELS
    assert vlm.visual_tokens(4096, 4096, max_pixels=vlm.OFFICIAL_MAX_PIXELS) > 3 * vlm.visual_tokens(4096, 4096)


def test_missing_weights_name_the_repository(tmp_path, monkeypatch):
    monkeypatch.setenv("BANANA100_WEIGHTS", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    import huggingface_hub.constants as c

    monkeypatch.setattr(c, "HF_HUB_OFFLINE", True)
    with pytest.raises(WeightsNotFoundError, match="TianheWu/VisualQuality-R1-7B"):
        vlm.VLMScorer(device="cpu")


def test_evaluate_module(tiny):
    """metrics/visualquality_r1 through evaluate.load, with the tiny model handed over."""

    import evaluate

    from fixtures.repopaths import REPO

    folder = REPO / "metrics" / "visualquality_r1"
    module = evaluate.load(str(folder))
    module.use_model(*tiny)
    with pytest.raises(ScoreUndefinedError) as info:
        module.compute(images=_images(2), device="cpu", max_pixels=112 * 112, max_new_tokens=8, keep_text=True)
    assert all(isinstance(e, AnswerParseError) for e in info.value.errors.values())
    with pytest.raises(TypeError, match="unexpected"):
        module.compute(images=_images(1), backend="pyiqa")
    # the device as for every metric: left out, the default one (was a NameError); a bad one, one UsageError
    with pytest.raises(ScoreUndefinedError):
        module.compute(images=_images(1), max_pixels=112 * 112, max_new_tokens=8)
    for bad in ("tpu", "", "cuda:9"):
        with pytest.raises(UsageError, match="device"):
            module.compute(images=_images(1), device=bad)
        with pytest.raises(UsageError, match="device"):
            _scorer(tiny, device=bad)


def test_scoring_rows_and_texts_file(tiny, tmp_path):
    """`banana100 score`'s chunk scoring with VisualQuality-R1: per-image errors, the answers file."""
    import json

    from banana100 import scoring

    scorer = _scorer(tiny, batch_size=2, keep_text=True)
    images = _images(3)
    chunk = [scoring.Decoded({"chain_id": "c", "step": k}, f"c/step_{k}.png", ["visualquality_r1"], rgb=img)
             for k, img in enumerate(images)]
    rows = scoring.score_chunk(chunk, {"visualquality_r1": scorer})
    assert [r["step"] for r in rows] == [0, 1, 2]
    assert all(np.isnan(r["score"]) and "gave no score" in r["error"] and "c/step_" in r["error"] for r in rows)
    assert all(r["mode"] == scorer.mode and r["backend"] == "transformers" for r in rows)
    out = tmp_path / "texts.jsonl"
    scoring.append_texts(out, rows)
    kept = [json.loads(line) for line in out.read_text().splitlines()]
    assert [k["step"] for k in kept] == [0, 1, 2] and all(k["text"] for k in kept)
    assert kept[0]["text"] == scorer.measure(images[:1], ["c/step_0.png"]).texts[0]


def test_resume_with_another_max_pixels_is_refused(tiny, tmp_path):
    """The scores file's `mode` carries max_pixels: scores made at another size are not mixed in."""
    import pyarrow as pa

    from banana100.errors import Banana100Error
    from banana100.scoring.provenance import Made

    before = pa.table({"metric": ["visualquality_r1"], "backend": ["transformers"], "mode": [_scorer(tiny).mode],
                       "precision": ["exact"], "version": pa.array([1], pa.int32())})
    Made({"visualquality_r1": _scorer(tiny)}, None).check(before, tmp_path / "s.parquet")  # same: resumes
    with pytest.raises(Banana100Error, match="max_pixels=50176"):
        Made({"visualquality_r1": _scorer(tiny, max_pixels=224 * 224)}, None).check(before, tmp_path / "s.parquet")


def test_files_scored_like_arrays(tiny, tmp_path):
    """Paths are checked by header, decoded a batch at a time, and answer as their arrays do."""
    from PIL import Image

    images = _images(3)
    paths = []
    for k, a in enumerate(images):
        paths.append(tmp_path / f"{k}.png")
        Image.fromarray(a).save(paths[-1])
    s = _scorer(tiny, batch_size=2, keep_text=True)
    from_arrays = s.measure(images, ["0", "1", "2"]).texts
    from_files = s.measure_images([str(p) for p in paths])
    assert from_files.texts == from_arrays and str(paths[0]) in str(from_files.errors[0])
    with pytest.raises(ScoreUndefinedError):
        s.score([str(p) for p in paths])


def test_auto_batch_on_cpu_and_a_fixed_size_as_the_cap(tiny):
    sizes = [(56, 84)] * 9
    assert [len(b) for b in _scorer(tiny).batches(sizes)] == [vlm.CPU_AUTO_BATCH] * 2 + [1]
    assert [len(b) for b in _scorer(tiny, batch_size=2).batches(sizes)] == [2, 2, 2, 2, 1]
    assert [b for batch in _scorer(tiny, batch_size=1).batches(sizes) for b in batch] == list(range(9))


def test_auto_batch_follows_the_free_memory(tiny, monkeypatch):
    """On CUDA the batch is what the free memory holds by the per-token estimate; larger images, fewer."""
    import torch

    s = _scorer(tiny, max_pixels=2048 * 2048)
    s.device = torch.device("cuda")  # only the arithmetic runs: no kernel is launched
    per_image = {side: s.tokens_per_image(side, side) * s._bytes_per_token() * vlm.SAFETY for side in (224, 448)}
    monkeypatch.setattr(vlm, "free_bytes", lambda device: 10 * per_image[448] / vlm.MEMORY_SHARE)
    assert s.batch_limit(s.tokens_per_image(448, 448)) == 10
    assert s.batch_limit(s.tokens_per_image(224, 224)) == int(10 * per_image[448] // per_image[224])
    assert [len(b) for b in s.batches([(448, 448)] * 25)] == [10, 10, 5]
    monkeypatch.setattr(vlm, "free_bytes", lambda device: 1e30)
    assert s.batch_limit(100) == vlm.MAX_AUTO_BATCH
    s.batch_size = 3
    assert s.batch_limit(100) == 3


@pytest.mark.filterwarnings("ignore:.*could not be scored")  # the random model answers gibberish
def test_score_leaves_the_batch_size_to_each_metric_unless_asked(tiny, tmp_path, monkeypatch):
    """`banana100 score` without --batch-size: piqe keeps its 8, VisualQuality-R1 takes what the free
    memory holds (not capped at 8); `--batch-size N` caps both. The Python API's default is the same."""
    import inspect

    import torch
    from PIL import Image

    from banana100 import scoring
    from banana100.cli import main as cli_main

    model, processor = tiny

    class Tiny(vlm.VLMScorer):  # the CLI's scorer, on the tiny model (no weights here)
        def __init__(self, metric, device=None, batch_size=None, **options):
            super().__init__(metric, device=device, batch_size=batch_size, model=model, processor=processor,
                             max_new_tokens=12, **options)

    built = []

    def build_scorers(*args, **kw):
        built.append(real_build(*args, **kw))
        return built[-1]

    real_build = scoring.build_scorers
    monkeypatch.setattr(vlm, "VLMScorer", Tiny)
    monkeypatch.setattr(scoring, "check_metrics_ready", lambda metrics, backend: None)  # no weights needed
    monkeypatch.setattr(scoring, "build_scorers", build_scorers)
    images = tmp_path / "images"
    images.mkdir()
    for k, a in enumerate(_images(2)):
        Image.fromarray(a).save(images / f"{k}.png")
    argv = ["score", str(images), "--metrics", "visualquality_r1,piqe", "--device", "cpu", "--max-pixels", "12544"]
    assert cli_main(argv + ["--out", str(tmp_path / "auto.parquet")]) == 0
    assert cli_main(argv + ["--out", str(tmp_path / "three.parquet"), "--batch-size", "3"]) == 0
    (auto, three) = built
    assert auto["piqe"].batch_size == 8 and three["piqe"].batch_size == 3
    monkeypatch.setattr(vlm, "free_bytes", lambda device: 1e30)  # a large GPU: only the arithmetic runs
    for s in (auto["visualquality_r1"], three["visualquality_r1"]):
        s.device = torch.device("cuda")
    assert auto["visualquality_r1"].batch_size is None
    assert auto["visualquality_r1"].batch_limit(100) == vlm.MAX_AUTO_BATCH > 8
    assert three["visualquality_r1"].batch_limit(100) == 3
    # and `score` hands it chunks of that many (its chunks of 32 capped the batch before)
    assert auto["visualquality_r1"].largest_batch == vlm.MAX_AUTO_BATCH and three["visualquality_r1"].largest_batch == 3
    for api in (scoring.score_to_parquet, real_build):
        assert inspect.signature(api).parameters["batch_size"].default is None


def test_bytes_per_token_of_the_7b_model_matches_the_measured_peaks():
    from banana100.testing.tiny_qwen import config_7b

    # issue 31 (H200, random bf16 weights, batch 16): (peak - weights) / tokens = 210 (1K) - 229 (2K) kB a token
    assert 200e3 <= vlm.bytes_per_token(config_7b(tiny_processor()), 2) <= 235e3


class _OOMAbove(vlm.VLMScorer):
    """Runs out of memory for batches larger than `fits`."""

    fits = 2
    calls: list

    def generate(self, arrays):
        import torch

        self.calls.append(len(arrays))
        if len(arrays) > self.fits:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return [f"<answer>{1 + a.shape[1] / 100:.2f}</answer>" for a in arrays]


def test_out_of_memory_halves_the_batch_and_keeps_it(tiny, caplog):
    model, processor = tiny
    s = _OOMAbove(model=model, processor=processor, device="cpu", batch_size=8)
    s.calls = []
    widths = [101, 102, 103, 104, 105, 106, 107, 108, 109]
    images = [np.zeros((60, w, 3), np.uint8) for w in widths]
    with caplog.at_level("WARNING", logger="banana100.metrics.vlm.scorer"):
        assert s.score_arrays(images) == pytest.approx([1 + w / 100 for w in widths])
    assert s.calls == [8, 4, 2, 2, 2, 2, 1]  # 8 fails, 4 fails, then pairs; the ninth image alone
    assert s._oom_cap == 2 and "out of memory with 4 images" in caplog.text
    s.fits = 0
    with pytest.raises(torch_oom()):
        s.score_arrays(images[:1])  # a single image that does not fit: the error itself


def torch_oom():
    import torch

    return torch.cuda.OutOfMemoryError


def test_images_are_preprocessed_on_the_scoring_device(tiny, monkeypatch):
    s = _scorer(tiny)
    seen = []
    real = type(s.processor.image_processor).__call__

    def spy(self, *args, **kwargs):
        seen.append(kwargs.get("device"))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(type(s.processor.image_processor), "__call__", spy)
    batch = s.inputs(_images(2))
    assert seen == ["cpu"] and batch["pixel_values"].device.type == "cpu"


def test_decoding_adds_no_device_read_per_token_of_its_own(tiny, monkeypatch):
    """Each host read of a tensor (item, bool, tolist, nonzero) is a sync on CUDA. Per decoded token,
    only transformers reads (generate's stop check; in 5.17 also the SDPA mask's padding check):
    nothing of the scorer's (no stopping criteria, streamer or per-token Python work of ours)."""
    import sys

    import torch

    s = _scorer(tiny, max_pixels=224 * 224)
    image = _images(1)[0]
    reads: list = []

    def counting(name):
        real = getattr(torch.Tensor, name)

        def read(self, *args, **kwargs):
            reads.append(sys._getframe(1).f_code.co_filename)
            return real(self, *args, **kwargs)

        return read

    def count(tokens):
        s.max_new_tokens = tokens
        reads.clear()
        with monkeypatch.context() as m:
            for name in ("item", "__bool__", "tolist", "nonzero"):
                m.setattr(torch.Tensor, name, counting(name))
            s.generate([image])
        inside = sum("transformers" in f for f in reads)
        return inside, len(reads) - inside

    (few_in, few_out), (many_in, many_out) = count(2), count(10)
    assert many_in - few_in >= 8  # transformers' own per-token reads are seen: the counting works
    assert many_out == few_out  # none of ours grows with the tokens
