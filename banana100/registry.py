"""The metric table: every roster metric's facts, in one place.

Everything that needs to know about a metric (the engine, the weights store, the evaluate
modules and their cards, the report, the protocol's orientation) reads it from here.
Directions and ranges follow pyiqa's `DEFAULT_CONFIGS` (pyiqa 0.1.16); a test checks that
they still agree.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .errors import UnknownMetricError

PYIQA_WEIGHTS_REPO = "chaofengc/IQA-PyTorch-Weights"


@dataclass(frozen=True)
class WeightFile:
    """One file a metric needs. `filename` is its name in pyiqa's cache and in BANANA100_WEIGHTS."""

    filename: str
    repo_id: str = PYIQA_WEIGHTS_REPO  # Hub repo it downloads from
    sha256: str | None = None
    licence: str = "see the metric's original release"


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
    pyiqa_kwargs: dict = field(default_factory=dict)
    # Keyword under which the pyiqa arch takes a local path to its (first) file, if any.
    path_kwarg: str | None = None
    batchable: bool = True  # the arch scores a BxCxHxW batch in one call

    @property
    def direction(self) -> str:
        return "lower is better" if self.lower_better else "higher is better"


# The LIVE copyright notice (NOTICE-LIVE) permits use "for any purpose" provided the notice is
# kept with the files and LIVE / UT Austin is acknowledged in publications using them.
LIVE = "LIVE licence (University of Texas at Austin): keep the copyright notice, acknowledge LIVE; see NOTICE-LIVE"

_SPECS = [
    MetricSpec(
        # min_size: the smallest side pyiqa 0.1.16 scores without raising (measured on crops
        # of natural images): PIQE 8 (16-px blocks after its symmetric padding).
        "piqe", "PIQE", "hand-crafted", True, (0, 100), min_size=8,
        paper="Venkatanath N. et al., Blind image quality evaluation using perception based features, NCC 2015.",
        citation="@inproceedings{venkatanath2015piqe, title={Blind image quality evaluation using perception based features}, author={Venkatanath, N and Praneeth, D and Bh, Maruthi Chandrasekhar and Channappayya, Sumohana S and Medasani, Swarup S}, booktitle={NCC}, year={2015}}",
    ),
    MetricSpec(
        "niqe", "NIQE", "hand-crafted", True, (0, None),
        files=(WeightFile("niqe_modelparameters.mat", sha256="fa2aa4d12dd9595c3fb6bf8b4e1a15c79d5d1469238d0901c88dead195be578d", licence=LIVE),),
        min_size=96, path_kwarg="pretrained_model_path",
        paper="Mittal A., Soundararajan R., Bovik A. C., Making a 'completely blind' image quality analyzer, IEEE SPL 2013.",
        citation="@article{mittal2013niqe, title={Making a ``completely blind'' image quality analyzer}, author={Mittal, Anish and Soundararajan, Rajiv and Bovik, Alan C}, journal={IEEE Signal Processing Letters}, volume={20}, number={3}, pages={209--212}, year={2013}}",
    ),
    MetricSpec(
        "brisque", "BRISQUE", "hand-crafted", True, (0, 150),
        files=(WeightFile("brisque_svm_weights.pth", sha256="53997f776d076c49746ee6d50f3f8ffe1c436824312256211b957a7e139a338b", licence=LIVE),),
        # 7: below it pyiqa raises; under ~17 px a side the AGGD fits often give NaN.
        # Not batchable: its float32 SVR sum changes by up to ~0.01 with the batch size.
        min_size=7, path_kwarg="pretrained_model_path", batchable=False,
        paper="Mittal A., Moorthy A. K., Bovik A. C., No-reference image quality assessment in the spatial domain, IEEE TIP 2012.",
        citation="@article{mittal2012brisque, title={No-reference image quality assessment in the spatial domain}, author={Mittal, Anish and Moorthy, Anush Krishna and Bovik, Alan Conrad}, journal={IEEE Transactions on Image Processing}, volume={21}, number={12}, pages={4695--4708}, year={2012}}",
    ),
    MetricSpec(
        "ilniqe", "IL-NIQE", "hand-crafted", True, (0, None),
        files=(WeightFile("ILNIQE_templateModel.mat", sha256="14f4919a630498d732bbf11837d894d45a57f89c9ed84bea98851147290ce93c", licence="Apache-2.0 (IceClear/IL-NIQE)"),),
        # IL-NIQE resizes every input to 524x524 first: 1-2 px raise IndexError, 3-4 px
        # fail in the SVD (linalg error), 5 px and up score. Not batchable: batched scores
        # differ in the 7th digit and a batch of two 512x384 images takes ~4.7 GB.
        min_size=5, path_kwarg="pretrained_model_path", batchable=False,
        paper="Zhang L., Zhang L., Bovik A. C., A feature-enriched completely blind image quality evaluator, IEEE TIP 2015.",
        citation="@article{zhang2015ilniqe, title={A feature-enriched completely blind image quality evaluator}, author={Zhang, Lin and Zhang, Lei and Bovik, Alan C}, journal={IEEE Transactions on Image Processing}, volume={24}, number={8}, pages={2579--2591}, year={2015}}",
    ),
    MetricSpec("nrqm", "NRQM (Ma)", "hand-crafted", False, (0, 10), files=(WeightFile("NRQM_model.mat"),),
               path_kwarg="pretrained_model_path", batchable=False,
               paper="Ma C. et al., Learning a no-reference quality metric for single-image super-resolution, CVIU 2017."),
    MetricSpec("pi", "Perceptual Index", "hand-crafted", True, (0, None),
               files=(WeightFile("NRQM_model.mat"), WeightFile("niqe_modelparameters.mat", licence=LIVE)), batchable=False,
               paper="Blau Y. et al., The 2018 PIRM challenge on perceptual image super-resolution, ECCVW 2018."),
    MetricSpec("cnniqa", "CNNIQA", "cnn", False, (0, 1), files=(WeightFile("CNNIQA_koniq10k-e6f14c91.pth"),),
               paper="Kang L. et al., Convolutional neural networks for no-reference image quality assessment, CVPR 2014."),
    MetricSpec("dbcnn", "DBCNN", "cnn", False, (0, 1), files=(WeightFile("DBCNN_KonIQ10k-2de81c0a.pth"),),
               paper="Zhang W. et al., Blind image quality assessment using a deep bilinear convolutional neural network, TCSVT 2020."),
    MetricSpec("hyperiqa", "HyperIQA", "cnn", False, (0, 1), files=(WeightFile("HyperIQA-resnet50-koniq10k-c96c41b1.pth"),),
               paper="Su S. et al., Blindly assess image quality in the wild guided by a self-adaptive hyper network, CVPR 2020."),
    MetricSpec("wadiqam_nr", "WaDIQaM-NR", "cnn", False, (-1, 0.1), files=(WeightFile("WaDIQaM-NR-koniq-aaffea29.pth"),),
               paper="Bosse S. et al., Deep neural networks for no-reference and full-reference image quality assessment, TIP 2018."),
    MetricSpec("nima", "NIMA", "cnn", False, (0, 10), files=(WeightFile("NIMA_InceptionV2_ava-b0c77c00.pth"),),
               paper="Talebi H., Milanfar P., NIMA: Neural image assessment, TIP 2018."),
    MetricSpec("paq2piq", "PaQ-2-PiQ", "cnn", False, (0, 100), files=(WeightFile("P2P_RoIPoolModel-fit.10.bs.120-ca69882e.pth"),),
               paper="Ying Z. et al., From patches to pictures (PaQ-2-PiQ), CVPR 2020."),
    MetricSpec("musiq", "MUSIQ", "transformer", False, (0, 100), files=(WeightFile("musiq_koniq_ckpt-e95806b9.pth"),),
               paper="Ke J. et al., MUSIQ: Multi-scale image quality transformer, ICCV 2021."),
    MetricSpec("maniqa", "MANIQA", "transformer", False, (0, 1), files=(WeightFile("ckpt_koniq10k.pt"),),
               paper="Yang S. et al., MANIQA: Multi-dimension attention network for NR-IQA, CVPRW 2022."),
    MetricSpec("tres", "TReS", "transformer", False, (0, 100), files=(WeightFile("tres_koniq-f0502926.pth"),),
               paper="Golestaneh S. A. et al., No-reference image quality assessment via transformers, relative ranking, and self-consistency, WACV 2022."),
    MetricSpec("topiq_nr", "TOPIQ-NR", "transformer", False, (0, 1), files=(WeightFile("cfanet_nr_koniq_res50-9a73138b.pth"),),
               paper="Chen C. et al., TOPIQ: A top-down approach from semantics to distortions for image quality assessment, TIP 2024."),
    MetricSpec("clipiqa", "CLIP-IQA", "clip-vlm", False, (0, 1), files=(WeightFile("RN50.pt", repo_id="openai/clip"),),
               paper="Wang J. et al., Exploring CLIP for assessing the look and feel of images, AAAI 2023."),
    MetricSpec("liqe", "LIQE", "clip-vlm", False, (1, 5), files=(WeightFile("liqe_koniq.pt"),),
               paper="Zhang W. et al., Blind image quality assessment via vision-language correspondence, CVPR 2023."),
    MetricSpec("qualiclip", "QualiCLIP", "clip-vlm", False, (0, 1), files=(WeightFile("QualiCLIP.pth"),),
               paper="Agnolucci L. et al., Quality-aware image-text alignment for opinion-unaware image quality assessment, 2024."),
    MetricSpec("arniqa", "ARNIQA", "clip-vlm", False, (0, 1), files=(WeightFile("ARNIQA.pth"), WeightFile("regressor_koniq10k.pth")),
               paper="Agnolucci L. et al., ARNIQA: Learning distortion manifold for image quality assessment, WACV 2024."),
    MetricSpec("qalign", "Q-Align", "clip-vlm", False, (1, 5), files=(WeightFile("one-align", repo_id="q-future/one-align"),),
               paper="Wu H. et al., Q-Align: Teaching LMMs for visual scoring via discrete text-defined levels, ICML 2024."),
]

METRICS: dict[str, MetricSpec] = {s.name: s for s in _SPECS}
ROSTER: tuple[str, ...] = tuple(METRICS)
CLASSICAL: tuple[str, ...] = tuple(n for n, s in METRICS.items() if s.family == "hand-crafted")


def get_metric(name: str) -> MetricSpec:
    try:
        return METRICS[name]
    except KeyError:
        raise UnknownMetricError(f"unknown metric {name!r}; known: {', '.join(ROSTER)}") from None


def parse_metric_list(text: str) -> list[str]:
    """'piqe,niqe' -> ['piqe', 'niqe'], checked against the table; 'all' -> the roster."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    if names == ["all"]:
        return list(ROSTER)
    for n in names:
        get_metric(n)
    return names
