"""Float32 precision (issue 30): the native forward and the engine run with TF32 off whatever the
user's global flags ("exact", the default), TF32 on in "fast" mode, and the flags come back
afterwards, also when the forward raises. On CPU the flags are spied on; on a GPU (`-m gpu`) the
scores themselves are compared with the CPU's."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from banana100.errors import UsageError
from banana100.metrics import native
from banana100.metrics.engine.scorer import MetricScorer
from banana100.metrics.native.piqe import PIQE
from banana100.metrics.precision import autocast_dtype, check_precision, float32_precision, tf32_in_effect
from banana100.testing.images import chain_images


def natural(side: int) -> np.ndarray:
    return chain_images(1, side)[0]

ON = {"conv": True, "matmul": True}
OFF = {"conv": False, "matmul": False}


def _flags() -> list:
    """Every setting the guard touches, as a comparable snapshot."""
    from banana100.metrics.precision import flag_leaves

    try:
        legacy = torch.get_float32_matmul_precision()
    except RuntimeError:  # torch 2.9+ after a mix of the old and new APIs: the leaves hold the state
        legacy = "mixed"
    return [o.fp32_precision for o, _ in flag_leaves()] + [legacy]


@pytest.fixture
def tf32_on():
    """The user's global flags set to TF32 (old and, where it exists, new API), restored after."""
    before = _flags()
    old = torch.get_float32_matmul_precision()
    torch.backends.cudnn.allow_tf32 = True
    torch.set_float32_matmul_precision("high")
    assert tf32_in_effect() == ON
    yield _flags()
    from banana100.metrics.precision import flag_leaves

    torch.set_float32_matmul_precision(old)
    torch.backends.cudnn.allow_tf32 = True
    for (o, _), value in zip(flag_leaves(), before[:-1], strict=True):  # before ends with the legacy flag
        o.fp32_precision = value


def _spy_piqe(monkeypatch) -> list:
    seen = []
    forward = PIQE.forward

    def spy(self, x):
        seen.append(tf32_in_effect())
        return forward(self, x)

    monkeypatch.setattr(PIQE, "forward", spy)
    return seen


def test_the_native_forward_runs_without_tf32_while_the_global_flags_allow_it(tf32_on, monkeypatch):
    seen = _spy_piqe(monkeypatch)
    model = native.build("piqe", {})
    with torch.no_grad():
        model(torch.rand(2, 3, 64, 64))
    assert seen == [OFF]
    assert _flags() == tf32_on and tf32_in_effect() == ON  # restored


def test_edit_damage_rel_measures_without_tf32_too(tf32_on, monkeypatch):
    """edit_damage_rel's statistics (and the bare score shared from them) run the native forward
    guarded as the engine's: no TF32 on a GPU whatever the user's flags."""
    from banana100.metrics.detector import model as ed
    from banana100.metrics.detector import relative as rel

    seen, forward = [], ed.EditDamage.forward
    monkeypatch.setattr(ed.EditDamage, "forward", lambda self, x: seen.append(tf32_in_effect()) or forward(self, x))
    rel.StatsModel(device="cpu")([np.zeros((64, 64, 3), np.uint8) + 100])
    assert seen == [OFF] and tf32_in_effect() == ON


def test_the_flags_come_back_when_the_forward_raises(tf32_on, monkeypatch):
    def broken(self, x):
        assert tf32_in_effect() == OFF
        raise RuntimeError("inside the forward")

    monkeypatch.setattr(PIQE, "forward", broken)
    with pytest.raises(RuntimeError, match="inside the forward"):
        native.build("piqe", {})(torch.rand(1, 3, 64, 64))
    assert _flags() == tf32_on


def test_the_guard_also_holds_against_the_generic_new_api_flag():
    if not hasattr(torch.backends, "fp32_precision"):
        pytest.skip("torch before 2.9 has no fp32_precision API")
    from banana100.metrics.precision import flag_leaves

    before = [o.fp32_precision for o, _ in flag_leaves()], torch.backends.fp32_precision
    torch.backends.fp32_precision = "tf32"
    try:
        snapshot = _flags()
        assert tf32_in_effect() == ON
        with float32_precision(False):
            assert tf32_in_effect() == OFF
            assert torch.backends.cuda.matmul.allow_tf32 is False  # both APIs agree inside: no error
        with float32_precision(True):
            assert tf32_in_effect() == ON
        assert _flags() == snapshot
    finally:
        torch.backends.fp32_precision = before[1]
        for (o, _), value in zip(flag_leaves(), before[0], strict=True):
            o.fp32_precision = value


def test_guarded_passes_in_two_threads_never_restore_the_flags_under_each_other(tf32_on):
    import threading

    order, inside = [], threading.Event()

    def first():
        with float32_precision(False):
            inside.set()
            order.append(("first in", tf32_in_effect()))
            threading.Event().wait(0.2)  # the second thread tries to enter meanwhile
            order.append(("first out", tf32_in_effect()))

    def second():
        inside.wait()
        with float32_precision(False):
            order.append(("second in", tf32_in_effect()))

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert order == [("first in", OFF), ("first out", OFF), ("second in", OFF)]
    assert _flags() == tf32_on


def test_scorer_precision_exact_by_default_and_fast_allows_tf32(tf32_on, monkeypatch):
    seen = _spy_piqe(monkeypatch)
    img = natural(256)
    exact = MetricScorer("piqe", device="cpu")
    fast = MetricScorer("piqe", device="cpu", precision="fast")
    assert exact.precision == "exact" and "precision='fast'" in repr(fast)
    a, b = exact.score([img]), fast.score([img])
    assert seen == [OFF, ON]
    assert a == b  # on CPU TF32 does not exist: the same arithmetic
    assert _flags() == tf32_on


def test_deep_models_run_exact_by_default_and_fast_on_request(tf32_on):
    seen = []

    class Spy(torch.nn.Module):
        def forward(self, x):
            seen.append((tf32_in_effect(), torch.is_autocast_enabled("cpu")))
            return x.mean(dim=(1, 2, 3))

    img = natural(256)
    MetricScorer.from_model("cnniqa", Spy(), device="cpu").score([img])
    MetricScorer.from_model("cnniqa", Spy(), device="cpu", precision="fast").score([img])
    assert seen == [(OFF, False), (ON, False)]  # no bfloat16 autocast on CPU
    assert _flags() == tf32_on


def test_autocast_is_bfloat16_only_for_fast_deep_metrics_on_a_gpu():
    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    assert autocast_dtype("fast", cuda) is torch.bfloat16
    assert autocast_dtype("exact", cuda) is None and autocast_dtype("fast", cpu) is None
    assert autocast_dtype("exact", cpu, half=True) is torch.float16


def test_an_unknown_precision_is_refused():
    with pytest.raises(UsageError, match="exact, fast"):
        check_precision("tf32")
    with pytest.raises(UsageError, match="exact, fast"):
        MetricScorer("piqe", device="cpu", precision="medium")


# float32 sums in another order on CUDA: measured on an H200 (bench/gpu_session.sh, 2026-12-04) at
# most 1.2e-4 (BRISQUE) and 1.3e-4 (IL-NIQE) relative, the others under 1e-4; TF32 moved BRISQUE 8 %
CUDA_RTOL = {"brisque": 5e-4, "ilniqe": 5e-4}


@pytest.mark.gpu
@pytest.mark.parametrize("metric", ["piqe", "niqe", "brisque", "ilniqe", "nrqm", "pi", "edit_damage"])
def test_cuda_scores_equal_cpu_scores_with_the_global_tf32_flags_on(metric, tf32_on, weights_from_shared):
    """The native scores on CUDA equal the CPU's: TF32 (on here, as a user may have it) is held off."""
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device visible to torch")
    from banana100.metrics.weights import missing

    if missing(metric):
        pytest.skip(f"{metric}: {', '.join(missing(metric))} not found (BANANA100_WEIGHTS)")
    images = chain_images(3, 512)
    cpu = MetricScorer(metric, device="cpu").score(images)
    cuda = MetricScorer(metric, device="cuda").score(images)
    np.testing.assert_allclose(cuda, cpu, rtol=CUDA_RTOL.get(metric, 1e-4), atol=1e-9)


# -- the scores file records the precision ---------------------------------------------------


def test_scores_file_records_the_precision_and_refuses_to_mix(tmp_path, weights_from_shared):
    import pyarrow.parquet as pq

    from banana100 import scoring
    from banana100.cli import main
    from banana100.errors import Banana100Error
    from banana100.testing.runfolder import make_run_folder

    make_run_folder(tmp_path / "run", steps=1, size=(100, 120))
    out = tmp_path / "s.parquet"
    main(["score", str(tmp_path / "run"), "--metrics", "piqe", "--out", str(out), "--device", "cpu",
          "--precision", "fast"])
    assert set(pq.read_table(out).column("precision").to_pylist()) == {"fast"}
    with pytest.raises(Banana100Error, match="precision='fast'.*precision='exact'"):
        scoring.score_to_parquet(tmp_path / "run", ["piqe", "niqe"], out, device="cpu", progress=False)
    with pytest.raises(UsageError, match="precision"):
        scoring.score_to_parquet(tmp_path / "run", ["piqe"], tmp_path / "t.parquet", device="cpu", progress=False,
                                 precision="tf32")


def test_scores_files_from_before_the_precision_column_read_as_exact(tmp_path, weights_from_shared):
    import pyarrow.parquet as pq

    from banana100 import scoring
    from banana100.errors import Banana100Error
    from banana100.testing.runfolder import make_run_folder

    make_run_folder(tmp_path / "run", steps=1, size=(100, 120))
    out = tmp_path / "s.parquet"
    scoring.score_to_parquet(tmp_path / "run", ["piqe"], out, device="cpu", progress=False)
    old = pq.read_table(out).drop_columns(["precision"])
    pq.write_table(old, out)
    assert set(scoring.read_scores(out).column("precision").to_pylist()) == {"exact"}
    with pytest.raises(Banana100Error, match="precision='exact'"):
        scoring.score_to_parquet(tmp_path / "run", ["piqe"], out, device="cpu", progress=False, precision="fast")
    scoring.score_to_parquet(tmp_path / "run", ["piqe", "niqe"], out, device="cpu", progress=False)  # resumes
    table = pq.read_table(out)
    assert table.num_rows == 2 * old.num_rows and set(table.column("precision").to_pylist()) == {"exact"}


def test_the_evaluate_module_takes_precision(weights_from_shared):
    evaluate = pytest.importorskip("evaluate")
    from fixtures.repopaths import REPO

    module = evaluate.load(str(REPO / "metrics" / "piqe"))
    img = natural(256)
    assert module.compute(images=[img], device="cpu", precision="fast")["scores"] == \
        module.compute(images=[img], device="cpu")["scores"]
    with pytest.raises(UsageError):
        module.compute(images=[img], device="cpu", precision="half")


@pytest.mark.integration
def test_the_gpu_precision_script_runs_on_cpu(tmp_path, weights_from_shared):
    """bench/gpu/gpu_precision_check.py, what the lead runs on a GPU, smoke-run on CPU (every difference 0)."""
    import json
    import subprocess
    import sys

    from fixtures.repopaths import REPO

    out = tmp_path / "p.json"
    subprocess.run([sys.executable, "-m", "bench.gpu.gpu_precision_check", "--device", "cpu", "--metrics",
                    "piqe", "--side", "256", "--n", "1", "--out", str(out), "--card-data", str(tmp_path / "c.json")],
                   check=True, capture_output=True, cwd=REPO)
    row = json.loads(out.read_text())["rows"][0]
    assert row["metric"] == "piqe" and row["fast_vs_exact_max_rel"] == 0.0 and row["exact_vs_cpu_tf32_on"] == 0.0
    assert json.loads((tmp_path / "c.json").read_text())["metrics"]["piqe"]["device"] == "cpu"
