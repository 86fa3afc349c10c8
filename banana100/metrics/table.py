"""The metric table: every roster metric's facts, in one place.

Everything that needs to know about a metric (the engine, the weights store, the evaluate
modules and their cards, the report, the protocol's orientation) reads it from here.
Directions and ranges follow pyiqa's `DEFAULT_CONFIGS` (pyiqa 0.1.16); a test checks that
they still agree.
"""

from __future__ import annotations

from dataclasses import dataclass

from banana100.errors import UnknownMetricError, UsageError

PYIQA_WEIGHTS_REPO = "chaofengc/IQA-PyTorch-Weights"
# The most same-size images per forward pass when none is asked (batch_size=None): every metric's
# default but VisualQuality-R1's, whose batches hold as many images as the free memory does
# (banana100.metrics.vlm.scorer).
DEFAULT_BATCH_SIZE = 8


# Where the library that reads a file looks for it (the engine stages found files there):
#   pyiqa  $TORCH_HOME/hub/pyiqa/<file>        pyiqa's `load_file_from_url`
#   torch  $TORCH_HOME/hub/checkpoints/<file>  torchvision weights, `torch.hub.load_state_dict_from_url`
#   clip   $TORCH_HOME/hub/clip/<file>         pyiqa's copy of OpenAI CLIP's `clip.load`
#   hf     the Hugging Face cache              timm backbones (`<repo>/<remote_name>`), whole repos
CACHES = ("pyiqa", "torch", "clip", "hf")


@dataclass(frozen=True)
class WeightFile:
    """One file a metric needs. `filename` is its name in BANANA100_WEIGHTS (and in its cache).

    Files on the Hugging Face Hub have `repo_id` (and `remote_name` when the name in the repo
    differs, as for timm's `model.safetensors`); other files have a direct `url` (torchvision,
    OpenAI CLIP). `snapshot=True` means a whole Hub repository, kept as a folder.
    """

    filename: str
    repo_id: str | None = PYIQA_WEIGHTS_REPO  # Hub repo it downloads from (None: `url`)
    sha256: str | None = None
    licence: str = "see the metric's original release"
    url: str | None = None  # direct download URL, for files that are not on the Hub
    remote_name: str | None = None  # name inside the Hub repo, when not `filename`
    cache: str = "pyiqa"  # see CACHES
    sha256_prefix: str | None = None  # a known prefix of the sha256 (torchvision's file names)
    size: int | None = None  # bytes, approximate unless `sha256` is pinned
    role: str = "checkpoint"  # checkpoint | backbone | parameters
    snapshot: bool = False
    timm_name: str | None = None  # for timm backbones: the model name pyiqa creates

    @property
    def download_url(self) -> str:
        """Where the file comes from (the same URL pyiqa, torchvision or CLIP would use)."""
        if self.url:
            return self.url
        if self.snapshot:
            return f"https://huggingface.co/{self.repo_id}"
        return f"https://huggingface.co/{self.repo_id}/resolve/main/{self.remote_name or self.filename}"


@dataclass(frozen=True)
class MetricSpec:
    name: str  # pyiqa id
    display_name: str
    family: str  # hand-crafted | cnn | transformer | clip-vlm
    lower_better: bool
    score_range: tuple[float | None, float | None]  # nominal; None = open end
    files: tuple[WeightFile, ...] = ()
    min_size: int = 1  # smallest height/width the metric accepts
    paper: str = ""
    citation: str = ""
    # Keyword under which the pyiqa arch takes a local path to its (first) file, if any.
    path_kwarg: str | None = None
    batchable: bool = True  # the arch scores a BxCxHxW batch in one call
    # How pyiqa's arch sizes its input (the engine never resizes): prose for the card.
    resize: str = "none: the whole image at its own size"
    # Peak GPU memory (GiB) for one 1024x1024 and one 2048x2048 image, measured by
    # bench/gpu/gpu_check.py; None until measured.
    gpu_memory_gib: tuple[float | None, float | None] = (None, None)
    # Largest |half - float| seen by bench/gpu/gpu_check.py when half precision is allowed; None: never half.
    half_tolerance: float | None = None
    original_code: str = ""  # the authors' repository
    # True: scored by default with the batched torch code in `banana100.metrics.native` (backend
    # "native"); pyiqa stays selectable with backend="pyiqa".
    native: bool = False
    # The module whose `build(files, mode)` makes the native model, when it is not
    # `banana100.metrics.native.<name>` (the classical metrics' room).
    native_module: str | None = None
    # Files the pyiqa backend needs when they differ from `files` (the native backend's).
    pyiqa_files: tuple[WeightFile, ...] | None = None
    # min_size of the deep metrics: the smallest square side pyiqa 0.1.16's arch scores without
    # error, measured on the archs built with random weights (banana100/testing/untrained.py); size
    # handling does not depend on the weights. Of the hand-crafted metrics: the smallest
    # meaningful side, measured by bench/metrics/bench_min_size.py (PIQE, NIQE, BRISQUE, IL-NIQE) or
    # from the feature stage (NRQM, PI); `min_size_note` says how, for the card.
    min_size_note: str = ""
    # Smallest side pyiqa 0.1.16 accepts without raising, when below min_size (tests check it).
    pyiqa_min_size: int | None = None
    # A uniform image (every pixel the same colour): "scored" (the model's output, like any other
    # image), "undefined" (ScoreUndefinedError for that image, the others kept: the metric's
    # statistics divide by the image's zero variance), or a number (that documented value,
    # returned without running the model). `uniform_note` says what pyiqa gives, for the card.
    uniform: str | float = "scored"
    uniform_note: str = ""
    # The evaluators beyond the roster (EVALUATORS below): the only backend they have when it is
    # not pyiqa/native ("transformers": banana100.metrics.vlm.scorer), and whether they can run at all
    # ("unavailable": no inference code or weights are public; `status_note` says what is missing).
    model_backend: str | None = None
    status: str = "available"
    status_note: str = ""
    extra: str = "deep"  # the pip extra that brings what its backend imports
    # False: a metric of this toolkit that pyiqa does not have (the edit_damage detector): native only.
    in_pyiqa: bool = True
    # The version of the metric's scores: bump it whenever a change alters them (a new form or new
    # fitted constants). Scores files record it per row, so that rows of two versions are never
    # resumed into one file or compared; caches of scores (the Space's) name it.
    version: int = 1
    # The metric scored beside this one against each image's reference (a chain's step 0, or
    # `score --reference`): edit_damage's is edit_damage_rel.
    companion: str | None = None

    @property
    def accepted_min_size(self) -> int:
        """The smallest side pyiqa 0.1.16 scores without raising (min_size unless stated)."""
        return self.pyiqa_min_size if self.pyiqa_min_size is not None else self.min_size

    @property
    def direction(self) -> str:
        return "lower is better" if self.lower_better else "higher is better"

    @property
    def default_backend(self) -> str:
        return self.model_backend or ("native" if self.native else "pyiqa")

    @property
    def backends(self) -> tuple[str, ...]:
        if self.model_backend:
            return (self.model_backend,)
        if not self.in_pyiqa:
            return ("native",)
        return ("native", "pyiqa") if self.native else ("pyiqa",)

    def check_backend(self, backend: str | None) -> str:
        """`backend` (None: the default) checked against the ones this metric has."""
        backend = backend or self.default_backend
        if backend not in self.backends:
            raise UsageError(f"{self.name}: backend must be one of {self.backends}, got {backend!r}"
                             + ("" if self.native or self.model_backend or not self.in_pyiqa else
                                " (only the six hand-crafted metrics have a native backend)")
                             + ("" if self.in_pyiqa else " (this toolkit's own metric: pyiqa does not have it)"))
        return backend

    def backend_files(self, backend: str | None = None) -> tuple[WeightFile, ...]:
        """The files `backend` (default: the metric's default backend) reads."""
        if self.check_backend(backend) == "pyiqa" and self.pyiqa_files is not None:
            return self.pyiqa_files
        return self.files

    @property
    def all_files(self) -> tuple[WeightFile, ...]:
        """Every file of every backend, each once (what `banana100 weights` lists and fetches)."""
        out = {wf.filename: wf for wf in self.files + (self.pyiqa_files or ())}
        return tuple(out.values())


# The LIVE copyright notice (NOTICE-LIVE) permits use "for any purpose" provided the notice is
# kept with the files and LIVE / UT Austin is acknowledged in publications using them.
LIVE = "LIVE licence (University of Texas at Austin): keep the copyright notice, acknowledge LIVE; see NOTICE-LIVE"


# Licence wording for checkpoints whose licence pyiqa does not state.
_NOT_STATED = "not stated by pyiqa: see the authors' original release (linked in the card)"
_PYIQA_TRAINED = "not stated by pyiqa (pyiqa's own KonIQ-10k training run; PolyForm Noncommercial 1.0.0 likely applies, as to pyiqa)"
_TORCHVISION = "BSD-3-Clause (torchvision; ImageNet-trained weights: ImageNet's terms of access may apply)"
_NIQE_SHA = "fa2aa4d12dd9595c3fb6bf8b4e1a15c79d5d1469238d0901c88dead195be578d"
# NRQM: below 84 px a side its smallest pyramid level has too few 5x5 blocks for the forests'
# 75 features (pyiqa fails outright under 45 px); measured on the feature stage, which needs no
# model file. PI adds NIQE's 96 px plus its 8-px shave.
_NRQM_MIN = 84
_PI_MIN = 104
# Smallest meaningful side of PIQE, NIQE, BRISQUE and IL-NIQE, measured by bench/metrics/bench_min_size.py
# (bench/results/metrics/min_size.json, BENCHMARKS.md) on crops of five natural images.
_CRITERION = ("the criterion of bench/metrics/bench_min_size.py: crops of natural images keep their ranking when "
              "moved by 2 px (Spearman rho >= 0.8 between the two scores) and no crop scores NaN, at that "
              "side and every larger one measured")
_MEASURED = ("{side} px, measured by " + _CRITERION + "; at {below} px it fails. pyiqa 0.1.16 accepts images "
             "down to {pyiqa} px, where the score depends on where the crop falls more than on what it shows.")
_ILNIQE_MIN, _ILNIQE_BELOW = 64, 48  # IL-NIQE: 15 crops a side (about 10 s an image on the loaded build machine)
# OpenAI CLIP: pyiqa's clip.load downloads from openaipublic into $TORCH_HOME/hub/clip and
# checks the sha256 that the URL itself carries.
_CLIP = {
    "RN50": ("RN50.pt", "afeb0e10f9e5a86da6080e35cf09123aca3b358a0c3e3b6c78a7b63bc04b6762", 255_975_000),
    "ViT-B/32": ("ViT-B-32.pt", "40d365715913c9da98579312b702a82c18be219cc2a73407c4526f58eba950af", 353_976_000),
}


def _clip(name: str) -> WeightFile:
    filename, sha, size = _CLIP[name]
    return WeightFile(filename, repo_id=None, sha256=sha, cache="clip", size=size, role="backbone",
                      url=f"https://openaipublic.azureedge.net/clip/models/{sha}/{filename}",
                      licence="MIT (OpenAI CLIP)")


def _tv(filename: str, size: int) -> WeightFile:
    """A torchvision ImageNet checkpoint: the name carries the first 8 hex digits of its sha256."""
    return WeightFile(filename, repo_id=None, cache="torch", size=size, role="backbone",
                      sha256_prefix=filename.rsplit("-", 1)[1].split(".")[0],
                      url=f"https://download.pytorch.org/models/{filename}", licence=_TORCHVISION)


def _timm(model: str, tag: str) -> WeightFile:
    """A timm backbone: `model.safetensors` of the Hub repo `timm/<tag>`, kept as `<tag>.safetensors`."""
    return WeightFile(f"{tag}.safetensors", repo_id=f"timm/{tag}", remote_name="model.safetensors", cache="hf",
                      role="backbone", timm_name=model, licence="Apache-2.0 (timm; per timm's pretrained config)")


def _live_brisque(name: str, sha256: str, size: int) -> WeightFile:
    """LIVE's BRISQUE LIBSVM model (`allmodel`) or feature ranges (`allrange`), as released."""
    return WeightFile(f"brisque_live_{name}", repo_id=None, sha256=sha256, size=size, role="parameters",
                      url=f"https://raw.githubusercontent.com/utlive/BRISQUE/HEAD/MATLAB/{name}", licence=LIVE)


_SPECS = [
    MetricSpec(
        # pyiqa 0.1.16 scores from 8 px (16-px blocks after its symmetric padding), but its
        # block grid makes small crops rank differently when moved by 2 px (bench_min_size).
        "piqe", "PIQE", "hand-crafted", True, (0, 100), native=True, min_size=96, pyiqa_min_size=8,
        min_size_note=_MEASURED.format(side=96, below=80, pyiqa=8),
        uniform=100.0,
        uniform_note="100, the worst score, for every uniform image: no 16x16 block has any activity, so "
                     "PIQE's formula gives (0 + C) / (C + 0) x 100. MATLAB's piqe (mode \"official\") gives 100; "
                     "pyiqa 0.1.16 gives 100 too, except NaN for an all-black image (it divides the image by "
                     "its maximum, 0), which banana100 scores 100 like the others, with either backend.",
        paper="Venkatanath N. et al., Blind image quality evaluation using perception based features, NCC 2015.",
        citation="@inproceedings{venkatanath2015piqe, title={Blind image quality evaluation using perception based features}, author={Venkatanath, N and Praneeth, D and Bh, Maruthi Chandrasekhar and Channappayya, Sumohana S and Medasani, Swarup S}, booktitle={NCC}, year={2015}}",
    ),
    MetricSpec(
        "niqe", "NIQE", "hand-crafted", True, (0, None), native=True,
        files=(WeightFile("niqe_modelparameters.mat", sha256=_NIQE_SHA, size=8_347, licence=LIVE),),
        min_size=96, path_kwarg="pretrained_model_path",
        min_size_note="96 px is NIQE's patch size (pyiqa raises below it); from 96 px up the score passes "
                      + _CRITERION + " (rho 0.99 at 96 px; bench/metrics/bench_min_size.py, BENCHMARKS.md).",
        uniform="undefined",
        uniform_note="undefined (ScoreUndefinedError for that image): every patch of a uniform image has zero "
                     "variance, so the fitted Gaussian model is degenerate. pyiqa 0.1.16 raises torch's "
                     "LinAlgError (SVD did not converge) and fails the whole call; the native code gives NaN (bench/metrics/probe_uniform.py).",
        paper="Mittal A., Soundararajan R., Bovik A. C., Making a 'completely blind' image quality analyzer, IEEE SPL 2013.",
        citation="@article{mittal2013niqe, title={Making a ``completely blind'' image quality analyzer}, author={Mittal, Anish and Soundararajan, Rajiv and Bovik, Alan C}, journal={IEEE Signal Processing Letters}, volume={20}, number={3}, pages={209--212}, year={2013}}",
    ),
    MetricSpec(
        "brisque", "BRISQUE", "hand-crafted", True, (0, 150), native=True,
        # The native backend reads LIVE's own LIBSVM files; pyiqa reads its torch conversion.
        files=(_live_brisque("allmodel", "8b04d6045f1b27261610c8ab1730fdcc14ec80bfab0f1ab5f703bbc2927314de", 353_497),
               _live_brisque("allrange", "e47d753d96b631e1aa2dbac8c4e51ade767f2def8ce678c7130b6b3f90ee915f", 741)),
        pyiqa_files=(WeightFile("brisque_svm_weights.pth", sha256="53997f776d076c49746ee6d50f3f8ffe1c436824312256211b957a7e139a338b", size=231_069, licence=LIVE),),
        # pyiqa raises below 7 px; up to 28 px some crops' AGGD fits give NaN (bench_min_size).
        # Not batchable: its float32 SVR sum changes by up to ~0.01 with the batch size.
        min_size=32, pyiqa_min_size=7, path_kwarg="pretrained_model_path", batchable=False,
        min_size_note=_MEASURED.format(side=32, below=28, pyiqa=7)
                      + " Below 24 px many crops give NaN (the AGGD fits on too few coefficients).",
        uniform="undefined",
        uniform_note="undefined (ScoreUndefinedError for that image): the MSCN coefficients of a uniform image "
                     "are all zero, and the AGGD fits divide 0 by 0. pyiqa 0.1.16 raises an AssertionError "
                     "for an all-black image, returns NaN for most grey levels and a rounding artefact "
                     "(108.3 for grey 254) for others; the native code, following pyiqa, does the same (bench/metrics/probe_uniform.py).",
        paper="Mittal A., Moorthy A. K., Bovik A. C., No-reference image quality assessment in the spatial domain, IEEE TIP 2012.",
        citation="@article{mittal2012brisque, title={No-reference image quality assessment in the spatial domain}, author={Mittal, Anish and Moorthy, Anush Krishna and Bovik, Alan Conrad}, journal={IEEE Transactions on Image Processing}, volume={21}, number={12}, pages={4695--4708}, year={2012}}",
    ),
    MetricSpec(
        "ilniqe", "IL-NIQE", "hand-crafted", True, (0, None), native=True,
        files=(WeightFile("ILNIQE_templateModel.mat", sha256="14f4919a630498d732bbf11837d894d45a57f89c9ed84bea98851147290ce93c", size=2_764_281, licence="Apache-2.0 (IceClear/IL-NIQE)"),),
        # IL-NIQE resizes every input to 524x524 first: in pyiqa 1-2 px raise IndexError, 3-4 px
        # fail in the SVD (linalg error), 5 px and up score, but a tiny image blown up to 524 px
        # scores nonsense (3149 for a 5x5 crop). Not batchable: batched scores
        # differ in the 7th digit and a batch of two 512x384 images takes ~4.7 GB.
        min_size=_ILNIQE_MIN, pyiqa_min_size=5, path_kwarg="pretrained_model_path", batchable=False,
        min_size_note=_MEASURED.format(side=_ILNIQE_MIN, below=_ILNIQE_BELOW, pyiqa=5),
        uniform="undefined",
        uniform_note="undefined (ScoreUndefinedError for that image): a uniform image has no structure for "
                     "IL-NIQE's gradient, log-Gabor and colour statistics. pyiqa 0.1.16 raises torch's "
                     "LinAlgError (SVD did not converge) and fails the whole call; the native code gives NaN "
                     "(mode \"pyiqa\") or the same 63.2 for every grey level (mode \"official\").",
        paper="Zhang L., Zhang L., Bovik A. C., A feature-enriched completely blind image quality evaluator, IEEE TIP 2015.",
        citation="@article{zhang2015ilniqe, title={A feature-enriched completely blind image quality evaluator}, author={Zhang, Lin and Zhang, Lei and Bovik, Alan C}, journal={IEEE Transactions on Image Processing}, volume={24}, number={8}, pages={2579--2591}, year={2015}}",
    ),
    MetricSpec(
        "nrqm", "NRQM (Ma)", "hand-crafted", False, (0, 10), native=True,
        files=(WeightFile("NRQM_model.mat", licence=_NOT_STATED, role="parameters"),),
        path_kwarg="pretrained_model_path", batchable=False, min_size=_NRQM_MIN, pyiqa_min_size=45,
        min_size_note="84 px: below it the smallest level of NRQM's pyramid has too few 5x5 blocks for the "
                      "forests' 75 features (pyiqa raises under 45 px); measured on the feature stage, which "
                      "needs no model file. bench/metrics/bench_min_size.py measures it by the criterion of the other "
                      "hand-crafted metrics where NRQM_model.mat is at hand (it was not on the build machine).",
        uniform="undefined",
        uniform_note="undefined (ScoreUndefinedError for that image): the divisive normalisation of NRQM's "
                     "wavelet features inverts a covariance that is zero for a uniform image; pyiqa 0.1.16's "
                     "feature stage raises torch's LinAlgError (singular matrix) there, and so did the native one.",
        original_code="https://github.com/chaoma99/sr-metric",
        paper="Ma C., Yang C.-Y., Yang X., Yang M.-H., Learning a no-reference quality measure for single-image super-resolution, CVIU 2017.",
        citation="@article{ma2017nrqm, title={Learning a no-reference quality metric for single-image super-resolution}, author={Ma, Chao and Yang, Chih-Yuan and Yang, Xiaokang and Yang, Ming-Hsuan}, journal={Computer Vision and Image Understanding}, volume={158}, pages={1--16}, year={2017}}",
    ),
    MetricSpec(
        "pi", "Perceptual Index", "hand-crafted", True, (0, None), native=True,
        files=(WeightFile("NRQM_model.mat", licence=_NOT_STATED, role="parameters"),
               WeightFile("niqe_modelparameters.mat", sha256=_NIQE_SHA, size=8_347, licence=LIVE, role="parameters")),
        batchable=False, min_size=_PI_MIN,
        min_size_note="104 px: NIQE's 96 px plus the 8 px PI shaves off (4 a side) before scoring; NRQM's "
                      "84 px is below that.",
        uniform="undefined",
        uniform_note="undefined (ScoreUndefinedError for that image): both of its parts, NIQE and NRQM, are "
                     "undefined for a uniform image (pyiqa 0.1.16 raises torch's LinAlgError).",
        resize="none; PI = ((10 - NRQM) + NIQE) / 2 on the image at its own size",
        original_code="https://github.com/roimehrez/PIRM2018",
        paper="Blau Y., Mechrez R., Timofte R., Michaeli T., Zelnik-Manor L., The 2018 PIRM challenge on perceptual image super-resolution, ECCV Workshops 2018.",
        citation="@inproceedings{blau2018pirm, title={The 2018 PIRM challenge on perceptual image super-resolution}, author={Blau, Yochai and Mechrez, Roey and Timofte, Radu and Michaeli, Tomer and Zelnik-Manor, Lihi}, booktitle={ECCV Workshops}, year={2018}}",
    ),
    MetricSpec(
        "cnniqa", "CNNIQA", "cnn", False, (0, 1),
        files=(WeightFile("CNNIQA_koniq10k-e6f14c91.pth", licence=_PYIQA_TRAINED),),
        resize="none: the whole image at its own size (32x32 patches inside the network)",
        min_size=7, original_code="https://github.com/lidq92/CNNIQA",
        paper="Kang L., Ye P., Li Y., Doermann D., Convolutional neural networks for no-reference image quality assessment, CVPR 2014.",
        citation="@inproceedings{kang2014cnniqa, title={Convolutional neural networks for no-reference image quality assessment}, author={Kang, Le and Ye, Peng and Li, Yi and Doermann, David}, booktitle={CVPR}, pages={1733--1740}, year={2014}}",
    ),
    MetricSpec(
        "dbcnn", "DBCNN", "cnn", False, (0, 1),
        files=(WeightFile("DBCNN_KonIQ10k-2de81c0a.pth", licence=_PYIQA_TRAINED),
               WeightFile("DBCNN_scnn-7ea73d75.pth", licence=_NOT_STATED, role="backbone"),
               _tv("vgg16-397923af.pth", 553433881)),
        min_size=16, original_code="https://github.com/zwx8981/DBCNN-PyTorch",
        paper="Zhang W., Ma K., Yan J., Deng D., Wang Z., Blind image quality assessment using a deep bilinear convolutional neural network, IEEE TCSVT 2020.",
        citation="@article{zhang2020dbcnn, title={Blind image quality assessment using a deep bilinear convolutional neural network}, author={Zhang, Weixia and Ma, Kede and Yan, Jia and Deng, Dexiang and Wang, Zhou}, journal={IEEE Transactions on Circuits and Systems for Video Technology}, volume={30}, number={1}, pages={36--47}, year={2020}}",
    ),
    MetricSpec(
        "hyperiqa", "HyperIQA", "cnn", False, (0, 1),
        files=(WeightFile("HyperIQA-resnet50-koniq10k-c96c41b1.pth", licence=_PYIQA_TRAINED),
               _timm("resnet50", "resnet50.a1_in1k")),
        resize="25 uniformly placed 224x224 crops, scores averaged (pyiqa's test-time policy); an image whose shorter side is at most 224 px is first upsampled (bilinear) to 225 px",
        min_size=1, original_code="https://github.com/SSL92/hyperIQA",
        paper="Su S., Yan Q., Zhu Y., Zhang C., Ge X., Sun J., Zhang Y., Blindly assess image quality in the wild guided by a self-adaptive hyper network, CVPR 2020.",
        citation="@inproceedings{su2020hyperiqa, title={Blindly assess image quality in the wild guided by a self-adaptive hyper network}, author={Su, Shaolin and Yan, Qingsen and Zhu, Yu and Zhang, Cheng and Ge, Xin and Sun, Jinqiu and Zhang, Yanning}, booktitle={CVPR}, pages={3667--3676}, year={2020}}",
    ),
    MetricSpec(
        "wadiqam_nr", "WaDIQaM-NR", "cnn", False, (-1, 0.1),
        files=(WeightFile("WaDIQaM-NR-koniq-aaffea29.pth", licence=_PYIQA_TRAINED),),
        resize="none: 32x32 patches of the whole image, weighted average",
        min_size=33, original_code="https://github.com/lidq92/WaDIQaM",
        paper="Bosse S., Maniry D., Mueller K.-R., Wiegand T., Samek W., Deep neural networks for no-reference and full-reference image quality assessment, IEEE TIP 2018.",
        citation="@article{bosse2018wadiqam, title={Deep neural networks for no-reference and full-reference image quality assessment}, author={Bosse, Sebastian and Maniry, Dominique and M{\\\"u}ller, Klaus-Robert and Wiegand, Thomas and Samek, Wojciech}, journal={IEEE Transactions on Image Processing}, volume={27}, number={1}, pages={206--219}, year={2018}}",
    ),
    MetricSpec(
        "nima", "NIMA", "cnn", False, (0, 10),
        files=(WeightFile("NIMA_InceptionV2_ava-b0c77c00.pth", licence=_PYIQA_TRAINED),
               _timm("inception_resnet_v2", "inception_resnet_v2.tf_in1k")),
        resize="resized (shorter side to 299, the backbone's input size) and centre-cropped to 299x299 inside pyiqa's arch",
        min_size=1, original_code="https://github.com/titu1994/neural-image-assessment",
        paper="Talebi H., Milanfar P., NIMA: Neural image assessment, IEEE TIP 2018.",
        citation="@article{talebi2018nima, title={NIMA: Neural image assessment}, author={Talebi, Hossein and Milanfar, Peyman}, journal={IEEE Transactions on Image Processing}, volume={27}, number={8}, pages={3998--4011}, year={2018}}",
    ),
    MetricSpec(
        "paq2piq", "PaQ-2-PiQ", "cnn", False, (0, 100),
        files=(WeightFile("P2P_RoIPoolModel-fit.10.bs.120-ca69882e.pth", licence=_NOT_STATED),
               _tv("resnet18-f37072fd.pth", 46830571)),
        min_size=1, original_code="https://github.com/baidut/PaQ-2-PiQ",
        paper="Ying Z., Niu H., Gupta P., Mahajan D., Ghadiyaram D., Bovik A., From patches to pictures (PaQ-2-PiQ): Mapping the perceptual space of picture quality, CVPR 2020.",
        citation="@inproceedings{ying2020paq2piq, title={From patches to pictures (PaQ-2-PiQ): Mapping the perceptual space of picture quality}, author={Ying, Zhenqiang and Niu, Haoran and Gupta, Praful and Mahajan, Dhruv and Ghadiyaram, Deepti and Bovik, Alan}, booktitle={CVPR}, pages={3575--3585}, year={2020}}",
    ),
    MetricSpec(
        "musiq", "MUSIQ", "transformer", False, (0, 100),
        files=(WeightFile("musiq_koniq_ckpt-e95806b9.pth", licence="Apache-2.0 (google-research/google-research, converted by pyiqa)"),),
        resize="multi-scale: the full image plus copies with the longer side at 224 and 384, cut into 32x32 patches (pyiqa's MUSIQ policy)",
        min_size=1, original_code="https://github.com/google-research/google-research/tree/master/musiq",
        paper="Ke J., Wang Q., Wang Y., Milanfar P., Yang F., MUSIQ: Multi-scale image quality transformer, ICCV 2021.",
        citation="@inproceedings{ke2021musiq, title={MUSIQ: Multi-scale image quality transformer}, author={Ke, Junjie and Wang, Qifei and Wang, Yilin and Milanfar, Peyman and Yang, Feng}, booktitle={ICCV}, pages={5148--5157}, year={2021}}",
    ),
    MetricSpec(
        "maniqa", "MANIQA", "transformer", False, (0, 1),
        files=(WeightFile("ckpt_koniq10k.pt", licence="Apache-2.0 (IIGROUP/MANIQA)"),
               _timm("vit_base_patch8_224", "vit_base_patch8_224.augreg2_in21k_ft_in1k")),
        resize="20 uniformly placed 224x224 crops, scores averaged (pyiqa's test-time policy; the config's scale=0.8 is a Swin attention factor, not a resize); an image whose shorter side is at most 224 px is first upsampled (bilinear) to 225 px",
        min_size=1, original_code="https://github.com/IIGROUP/MANIQA",
        paper="Yang S., Wu T., Shi S., Lao S., Gong Y., Cao M., Wang J., Yang Y., MANIQA: Multi-dimension attention network for no-reference image quality assessment, CVPR Workshops 2022.",
        citation="@inproceedings{yang2022maniqa, title={MANIQA: Multi-dimension attention network for no-reference image quality assessment}, author={Yang, Sidi and Wu, Tianhe and Shi, Shuwei and Lao, Shanshan and Gong, Yuan and Cao, Mingdeng and Wang, Jiahao and Yang, Yujiu}, booktitle={CVPR Workshops}, pages={1191--1200}, year={2022}}",
    ),
    MetricSpec(
        "tres", "TReS", "transformer", False, (0, 100),
        files=(WeightFile("tres_koniq-f0502926.pth", licence=_NOT_STATED),
               _tv("resnet50-0676ba61.pth", 102530333)),
        resize="50 uniformly placed 224x224 crops, scores averaged (pyiqa's test-time policy); an image whose shorter side is at most 224 px is first upsampled (bilinear) to 225 px",
        min_size=1, original_code="https://github.com/isalirezag/TReS",
        paper="Golestaneh S. A., Dadsetan S., Kitani K. M., No-reference image quality assessment via transformers, relative ranking, and self-consistency, WACV 2022.",
        citation="@inproceedings{golestaneh2022tres, title={No-reference image quality assessment via transformers, relative ranking, and self-consistency}, author={Golestaneh, S Alireza and Dadsetan, Saba and Kitani, Kris M}, booktitle={WACV}, pages={1220--1230}, year={2022}}",
    ),
    MetricSpec(
        "topiq_nr", "TOPIQ-NR", "transformer", False, (0, 1),
        files=(WeightFile("cfanet_nr_koniq_res50-9a73138b.pth", licence=_PYIQA_TRAINED),
               _timm("resnet50", "resnet50.a1_in1k")),
        resize="none: the whole image at its own size (ResNet-50 features, attention pooling)",
        min_size=1, original_code="https://github.com/chaofengc/IQA-PyTorch",
        paper="Chen C., Mo J., Hou J., Wu H., Liao L., Sun W., Yan Q., Lin W., TOPIQ: A top-down approach from semantics to distortions for image quality assessment, IEEE TIP 2024.",
        citation="@article{chen2024topiq, title={TOPIQ: A top-down approach from semantics to distortions for image quality assessment}, author={Chen, Chaofeng and Mo, Jiadi and Hou, Jingwen and Wu, Haoning and Liao, Liang and Sun, Wenxiu and Yan, Qiong and Lin, Weisi}, journal={IEEE Transactions on Image Processing}, year={2024}}",
    ),
    MetricSpec(
        "clipiqa", "CLIP-IQA", "clip-vlm", False, (0, 1),
        files=(_clip("RN50"),),
        resize="none: the whole image at its own size (CLIP RN50 without its positional embedding, as in pyiqa)",
        min_size=31, original_code="https://github.com/IceClear/CLIP-IQA",
        paper="Wang J., Chan K. C. K., Loy C. C., Exploring CLIP for assessing the look and feel of images, AAAI 2023.",
        citation="@inproceedings{wang2023clipiqa, title={Exploring CLIP for assessing the look and feel of images}, author={Wang, Jianyi and Chan, Kelvin CK and Loy, Chen Change}, booktitle={AAAI}, year={2023}}",
    ),
    MetricSpec(
        "liqe", "LIQE", "clip-vlm", False, (1, 5),
        files=(WeightFile("liqe_koniq.pt", licence=_NOT_STATED), _clip("ViT-B/32")),
        resize="15 224x224 patches taken from a 32-px stride grid (pyiqa's LIQE policy); pyiqa refuses images under 224 px a side (no upsampling)",
        min_size=224, original_code="https://github.com/zwx8981/LIQE",
        paper="Zhang W., Zhai G., Wei Y., Yang X., Ma K., Blind image quality assessment via vision-language correspondence: A multitask learning perspective, CVPR 2023.",
        citation="@inproceedings{zhang2023liqe, title={Blind image quality assessment via vision-language correspondence: A multitask learning perspective}, author={Zhang, Weixia and Zhai, Guangtao and Wei, Ying and Yang, Xiaokang and Ma, Kede}, booktitle={CVPR}, pages={14071--14081}, year={2023}}",
    ),
    MetricSpec(
        "qualiclip", "QualiCLIP", "clip-vlm", False, (0, 1),
        files=(WeightFile("QualiCLIP.pth", licence="CC BY-NC 4.0 (miccunifi/QualiCLIP; check the repository)"), _clip("RN50")),
        resize="none: the whole image and a half-size copy (CLIP RN50 without positional embedding)",
        min_size=31, original_code="https://github.com/miccunifi/QualiCLIP",
        paper="Agnolucci L., Galteri L., Bertini M., Quality-aware image-text alignment for opinion-unaware image quality assessment, arXiv 2403.11176, 2024.",
        citation="@article{agnolucci2024qualiclip, title={Quality-aware image-text alignment for opinion-unaware image quality assessment}, author={Agnolucci, Lorenzo and Galteri, Leonardo and Bertini, Marco}, journal={arXiv preprint arXiv:2403.11176}, year={2024}}",
    ),
    MetricSpec(
        "arniqa", "ARNIQA", "clip-vlm", False, (0, 1),
        files=(WeightFile("ARNIQA.pth", cache="torch", licence="CC BY-NC 4.0 (miccunifi/ARNIQA; check the repository)"),
               WeightFile("regressor_koniq10k.pth", licence="CC BY-NC 4.0 (miccunifi/ARNIQA; check the repository)"),
               _tv("resnet50-0676ba61.pth", 102530333)),
        resize="none: the whole image and a half-size (bilinear) copy through a ResNet-50",
        min_size=2, original_code="https://github.com/miccunifi/ARNIQA",
        paper="Agnolucci L., Galteri L., Bertini M., Del Bimbo A., ARNIQA: Learning distortion manifold for image quality assessment, WACV 2024.",
        citation="@inproceedings{agnolucci2024arniqa, title={ARNIQA: Learning distortion manifold for image quality assessment}, author={Agnolucci, Lorenzo and Galteri, Leonardo and Bertini, Marco and Del Bimbo, Alberto}, booktitle={WACV}, pages={189--198}, year={2024}}",
    ),
    MetricSpec(
        "qalign", "Q-Align", "clip-vlm", False, (1, 5),
        files=(WeightFile("one-align", repo_id="q-future/one-align", cache="hf", snapshot=True, size=16_400_000_000,
                          licence="see the q-future/one-align model card (an mPLUG-Owl2 / LLaMA-2 derivative: the LLaMA 2 Community License may apply)"),),
        batchable=False,  # pyiqa's QAlign asserts a batch of one
        resize="padded to a square with the mean colour, then resized to 448x448 by the CLIP image processor (pyiqa's Q-Align policy)",
        min_size=1, original_code="https://github.com/Q-Future/Q-Align",
        paper="Wu H., Zhang Z., Zhang W., Chen C., Liao L., Li C., Gao Y., Wang A., Zhang E., Sun W., Yan Q., Min X., Zhai G., Lin W., Q-Align: Teaching LMMs for visual scoring via discrete text-defined levels, ICML 2024.",
        citation="@inproceedings{wu2024qalign, title={Q-Align: Teaching LMMs for visual scoring via discrete text-defined levels}, author={Wu, Haoning and Zhang, Zicheng and Zhang, Weixia and Chen, Chaofeng and Liao, Liang and Li, Chunyi and Gao, Yixuan and Wang, Annan and Zhang, Erli and Sun, Wenxiu and Yan, Qiong and Min, Xiongkuo and Zhai, Guangtao and Lin, Weisi}, booktitle={ICML}, year={2024}}",
    ),
]

# Beyond the roster: this toolkit's own detector of recursive-edit damage (docs/edit-damage.md), native
# only; `banana100/metrics/detector/model.py` says what it measures and why.
_DETECTORS = [
    MetricSpec(
        "edit_damage", "Edit damage", "detector", True, (0, None), native=True, in_pyiqa=False, min_size=64,
        native_module="banana100.metrics.detector.model",
        version=14,  # 2: the evenness component weighs the grain term; 3: the signatures of issue 42 (crease, speckles, simplification, blocking); 4: the crease on contours only, the cast weighed by its share of greys, simplification beside edges, refit; 5: the crease read from the mean profile across the contours, refit; 6: the crease's profiles inside the frame; 7: specks alone in their window's ring, the lattice above rounding's amplitude, edges of 2 levels a pixel; 8: the bare grain term reads the floor's non-periodic share; 9: simplification read over at least 8 structured tiles, else not measured; 10: blocking where a crop after saving moved the grid; 11: edit_damage_rel reads colour edges blurred (colour_softness); 12: edit_damage_rel counts a lattice beyond a quarter of the source's own (the bare score unchanged); 13: edit_damage_rel counts colour edges blurred over twice softness's unit (the bare score unchanged); 14: the cast's second pass re-centred only from 1 % of the pixels (a handful of greys moves it no more)
        companion="edit_damage_rel",
        min_size_note="64 px: the lattice component looks at lags up to a quarter of the side (at most 32 px) "
                      "on 16x16 tiles; below 64 px too few tiles and lags remain.",
        uniform="scored",
        uniform_note="0 (to float32 rounding, under 1e-4): a uniform image has no grain, no lattice, no cast and no edges.",
        resize="none: the whole image at its own size",
        paper="Banana100 toolkit: grain after a difference-of-Gaussians band-pass in the flattest tiles; a periodic "
              "lattice in the high-pass residual's autocorrelation after Mi-Ripple / MIRAGE (arXiv 2609.11317); "
              "colour cast by grey-edge (van de Weijer et al., IEEE TIP 2007); softness by Crete et al.'s blur "
              "effect (SPIE 2007).",
        citation="@misc{banana100editdamage, title={Edit damage: a cheap detector of recursive-edit damage}, "
                 "note={Banana100 toolkit, metrics/edit_damage}}",
    ),
]

METRICS: dict[str, MetricSpec] = {s.name: s for s in _SPECS + _DETECTORS}
# The 21 NR-IQA metrics of the paper (pyiqa ids); the detectors are in METRICS but not here.
ROSTER: tuple[str, ...] = tuple(s.name for s in _SPECS)
DETECTORS: tuple[str, ...] = tuple(s.name for s in _DETECTORS)
CLASSICAL: tuple[str, ...] = tuple(n for n, s in METRICS.items() if s.family == "hand-crafted")


# The two evaluators the paper found to pass every chain. Not in the roster ("all" stays the
# 21 pyiqa metrics); get_metric and the resolver (banana100.metrics.resolve) know them.
VISUALQUALITY_R1_REPO = "TianheWu/VisualQuality-R1-7B"
_EVALUATOR_SPECS = [
    MetricSpec(
        "visualquality_r1", "VisualQuality-R1", "vlm-evaluator", False, (1, 5),
        files=(WeightFile("VisualQuality-R1-7B", repo_id=VISUALQUALITY_R1_REPO, cache="hf", snapshot=True,
                          # 8.3B parameters in bf16 (the Qwen2.5-VL-7B layout): about 16.6 GB, not
                          # downloaded here (no internet on the build machines)
                          size=16_600_000_000,
                          licence="MIT (model card of TianheWu/VisualQuality-R1-7B); code: Apache-2.0 "
                                  "(TianheWu/VisualQuality-R1); base model Qwen2.5-VL-7B-Instruct: Apache-2.0"),),
        model_backend="transformers", extra="vlm", min_size=28,
        min_size_note="28 px: one 28x28 merged patch of Qwen2.5-VL's vision encoder (the processor upsamples "
                      "smaller sides to it, which would score an interpolation, not the image).",
        resize="Qwen2.5-VL's own smart resize: both sides rounded to multiples of 28, area kept between "
               "3,136 and `max_pixels` (default 4,194,304: a 2048x2048 image goes in at full size)",
        original_code="https://github.com/TianheWu/VisualQuality-R1",
        paper="Wu T., Zou J., Liang J., Zhang L., Ma K., VisualQuality-R1: Reasoning-induced image quality "
              "assessment via reinforcement learning to rank, NeurIPS 2025 (arXiv 2505.14460).",
        citation="@inproceedings{wu2025visualquality, title={VisualQuality-R1: Reasoning-Induced Image Quality "
                 "Assessment via Reinforcement Learning to Rank}, author={Wu, Tianhe and Zou, Jian and Liang, Jie "
                 "and Zhang, Lei and Ma, Kede}, booktitle={NeurIPS}, year={2025}}",
    ),
    MetricSpec(
        "rali", "RALI", "clip-evaluator", False, (None, None),
        status="unavailable", extra="deep",
        status_note="no inference code is public: the repository xuanyuzhang21/RALI is not in any index this "
                    "project could search (code search, GitHub snapshot fetch), so the architecture that reads "
                    "ckpt.pt, pca.pkl, basis.npz and the best/ folder, the preprocessing and the score's range "
                    "and direction are unknown; its weights host and licence are unknown too. See docs/evaluators.md.",
        original_code="https://github.com/xuanyuzhang21/RALI",
        paper="RALI, ICLR 2026 (xuanyuzhang21/RALI): a CLIP-based quality scorer of about 0.3B parameters.",
    ),
]
EVALUATORS: dict[str, MetricSpec] = {s.name: s for s in _EVALUATOR_SPECS}


#: what says how a score was made, per row of a scores file (banana100/scoring/provenance.py): rows of one metric
#: that differ in any of these do not compare (score refuses to resume into them, report to read them together)
SCORE_METHOD = ("backend", "mode", "precision", "version")


def version_before_the_column(metric: str, components: dict | None, score: float | None) -> int | None:
    """The `version` of a scores-file row written before the column: 1 (no metric changed before it but
    edit_damage), except edit_damage's, read off its components (the evenness component came with version 2, the
    signatures' (blocking among them) with version 3;
    an error row: None, nothing scored), and a companion's (edit_damage_rel: None, its reference is unknown too)."""
    if metric in {s.companion for s in METRICS.values() if s.companion}:
        return None
    if metric != "edit_damage":
        return 1
    if score is None or score != score:
        return None
    components = components or {}
    if components.get("evenness") is None:
        return 1
    return 3 if components.get("blocking") is not None else 2  # the editors' signatures came with version 3


def known_names() -> tuple[str, ...]:
    """Every metric of the table a command takes by name, for each message that lists them: the roster,
    the detectors and what each scores beside itself (edit_damage_rel), the evaluators that can run."""
    return (*METRICS, *(s.companion for s in METRICS.values() if s.companion),
            *(n for n, s in EVALUATORS.items() if s.status == "available"))


def get_metric(name: str) -> MetricSpec:
    """The table's entry for `name` (any case: NIQE is niqe)."""
    spec = METRICS.get(name.lower()) or EVALUATORS.get(name.lower())
    if spec is None:
        raise UnknownMetricError(f"unknown metric {name!r}{did_you_mean(name)}; known: "
                                 f"{', '.join(known_names())}, "
                                 "pyiqa:<id>, or the folder / Hub id of an evaluate module")
    return spec


def did_you_mean(name: str, known=None) -> str:
    """"; did you mean 'niqe'?" for a near miss of a known name (difflib; default: the table's), else ""."""
    import difflib

    known = list(known if known is not None else known_names())
    close = difflib.get_close_matches(name.lower(), known, n=2, cutoff=0.6)
    return f"; did you mean {' or '.join(map(repr, close))}?" if close else ""


def all_specs() -> dict[str, MetricSpec]:
    """The roster and the evaluators: every metric the table knows."""
    return {**METRICS, **EVALUATORS}


def score_direction(lower_better: bool | None = None, metric: str | None = None) -> bool:
    """Whether a lower score means better quality: `lower_better` as given, else the metric
    table's entry for `metric`. Never a guess: with neither (or an unknown metric), a UsageError.
    PIQE's scores read the wrong way round turn a 100 % failure rate into about 50 %."""
    from banana100.errors import UsageError

    known = METRICS.get(str(metric).strip().lower()) if metric is not None else None
    if lower_better is None:
        if known is None:
            named = f"metric={metric!r} is not in the metric table; " if metric is not None else ""
            raise UsageError(f"{named}pass lower_better=True (a lower score means better quality: NIQE, "
                             "BRISQUE, PIQE, IL-NIQE, PI) or lower_better=False, or metric=<a pyiqa id>")
        return bool(known.lower_better)
    if not isinstance(lower_better, bool) and type(lower_better).__name__ != "bool_":  # numpy's bool too
        raise UsageError(f"lower_better must be True or False, got {lower_better!r}")
    if known is not None and bool(lower_better) != known.lower_better:
        raise UsageError(f"lower_better={bool(lower_better)} contradicts the metric table: {known.name} is "
                         f"{'lower' if known.lower_better else 'higher'}-is-better; leave lower_better out")
    return bool(lower_better)
