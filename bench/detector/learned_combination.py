"""Whether a combination of the bare terms learned from the development draws tells damage better than their sum.

    nice python -m bench.detector.learned_combination [--draws 8] [--model-b 4] [--splits 4]
        [--features terms|components|both] [--cache DIR] [--out FILE]

The unit search of bench/detector/component_variants.py fits only the signature terms' units, so its ceiling
(about 0.75 AUC on the weakest signature) leaves open whether another combination of the same terms would do better:
weights on every term, or a non-linear function of them. This answers it with the same chains (component_variants'
cache, made there once: draws 1..N of every signature and damage model B's draws 1..M) and each image's eight bare
terms as the shipped detector reads them (model.term_tensors).

The draws reuse about 50 sources, so a split by draw would test on sources it learned. The sources are split in
halves at random instead (--splits times, seeded): each combination is fitted on one half's chains, every signature
and model B pooled, to tell the clean image (step 0) from the damaged ones (steps 5, 10 and 20), and scored on the
other half's as the bare score is (per group: ROC AUC clean vs step 10, chains passing), beside the shipped sum on
the same chains. The combinations:

- logistic: weights on the eight terms (standardised on the fitted half) and a bias, L2 penalty 1e-3;
- network: a perceptron of log(1 + term), two hidden layers of 32, weight decay 1e-4, 400 full-batch Adam steps.

With --features components they read the twelve components (their magnitudes) instead of the eight terms, and with
both all twenty: whether the components hold more than the terms make of them (results file
learned_combination_<features>.json).

Fitted to these draws, a combination knows the damage models, which the held-out draws and the chains made outside
this repository do not allow a shipped score to know: so this is an upper bound of what combining can give, not a
candidate. What it showed is in docs/edit-damage-history.md ("Tried and not shipped").
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

if __package__ in (None, ""):  # run as a file, not with -m: the repository root on the path, as -m puts it
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.benchtools import command_line, environment, results_path, write_results

COMBINATIONS = ("sum", "logistic", "network")  # the sum: the shipped bare score, beside the two fitted
DAMAGED = (5, 10, 20)  # the steps fitted as damaged; step 0 as clean


def term_array(measured: dict) -> tuple[list[str], np.ndarray]:
    """(chains, their terms: chains x KEPT steps x model.TERMS), each image's bare terms as the detector sums them
    (simplification's 0 where it is not measured)."""
    import torch

    from banana100.metrics.detector import model
    from bench.detector.component_variants import KEPT

    chains = list(measured)
    comp = {n: torch.tensor([[measured[c][k][n] for k in KEPT] for c in chains], dtype=torch.float64)
            for n in model.COMPONENTS}
    terms = model.term_tensors(comp)
    terms["simplification"] = torch.where(comp["simplification"] == 0, 0.0, terms["simplification"])
    return chains, np.stack([terms[t].numpy() for t in model.TERMS], axis=-1)


def component_array(measured: dict, chains: list[str]) -> np.ndarray:
    """The chains' components' magnitudes (chains x KEPT steps x model.COMPONENTS), in `chains`' order."""
    from banana100.metrics.detector import model
    from bench.detector.component_variants import KEPT

    return np.abs(np.array([[[measured[c][k][n] for n in model.COMPONENTS] for k in KEPT] for c in chains]))


def source_halves(chains: list[str], seed: int) -> np.ndarray:
    """Whether each chain's source is in the fitted half: the distinct sources (a chain name's last part) shuffled
    with `seed`, the first half fitted."""
    sources = sorted({c.split("/")[-1] for c in chains})
    order = np.random.default_rng(seed).permutation(len(sources))
    fitted = {sources[i] for i in order[: len(sources) // 2]}
    return np.array([c.split("/")[-1] in fitted for c in chains])


def _examples(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(images' terms, label 1 damaged / 0 clean) of chains' terms x (chains x KEPT x terms)."""
    from bench.detector.component_variants import KEPT

    steps = [KEPT.index(0), *(KEPT.index(k) for k in DAMAGED)]
    feats = x[:, steps].reshape(-1, x.shape[-1])
    labels = np.tile([0.0, *([1.0] * len(DAMAGED))], len(x))
    return feats, labels


def fit(name: str, x: np.ndarray, seed: int):
    """The combination `name` (logistic, network) fitted on chains' features `x`: a function of features (... x
    features) -> scores (...)."""
    import torch

    feats, labels = _examples(x)
    prep = (lambda t: np.log1p(t)) if name == "network" else (lambda t: t)  # noqa: E731
    f = prep(feats)
    mean, std = f.mean(0), f.std(0) + 1e-9
    xs = torch.tensor((f - mean) / std, dtype=torch.float64)
    ys = torch.tensor(labels, dtype=torch.float64)
    torch.manual_seed(seed)
    if name == "logistic":
        net = torch.nn.Linear(x.shape[-1], 1).double()
        opt = torch.optim.LBFGS(net.parameters(), max_iter=500, line_search_fn="strong_wolfe")

        def closure():
            opt.zero_grad()
            loss = torch.nn.functional.binary_cross_entropy_with_logits(net(xs)[:, 0], ys) + 1e-3 * net.weight.square().sum()
            loss.backward()
            return loss

        opt.step(closure)
    else:
        net = torch.nn.Sequential(torch.nn.Linear(x.shape[-1], 32), torch.nn.ReLU(), torch.nn.Linear(32, 32),
                                  torch.nn.ReLU(), torch.nn.Linear(32, 1)).double()
        opt = torch.optim.Adam(net.parameters(), lr=1e-2, weight_decay=1e-4)
        for _ in range(400):
            opt.zero_grad()
            torch.nn.functional.binary_cross_entropy_with_logits(net(xs)[:, 0], ys).backward()
            opt.step()

    def score(t: np.ndarray) -> np.ndarray:
        z = torch.tensor((prep(t) - mean) / std, dtype=torch.float64)
        with torch.no_grad():
            return net(z)[..., 0].numpy()

    return score


def group_figures(score: np.ndarray, groups: np.ndarray) -> dict:
    """Per group of chains' scores (chains x KEPT): component_variants' figures (ROC AUC clean vs step 10, chains
    passing)."""
    from bench.detector.component_variants import KEPT, figures

    return {str(g): figures({i: dict(zip(KEPT, score[i], strict=True)) for i in np.flatnonzero(groups == g)})
            for g in dict.fromkeys(groups)}


def compare(chains: list[str], x: np.ndarray, splits: int, shipped: np.ndarray | None = None) -> dict:
    """Each split's figures on its held-out half by combination of the features `x` (chains x KEPT x features), and
    their means over the splits; the sum is the shipped bare score `shipped` (chains x KEPT; default: x's sum, where x
    holds the terms)."""
    groups = np.array([c.split("/")[1] for c in chains], dtype=object)
    shipped = x.sum(-1) if shipped is None else shipped
    per_split = []
    for s in range(splits):
        fitted = source_halves(chains, s)
        per_split.append({n: group_figures(shipped[~fitted] if n == "sum" else fit(n, x[fitted], s)(x[~fitted]),
                                           groups[~fitted]) for n in COMBINATIONS})
    mean = {n: {g: {k: round(float(np.mean([r[n][g][k] for r in per_split])), 3)
                    for k in ("auc_clean_vs_step10", "passed", "chains")}
                for g in per_split[0][n]}
            for n in COMBINATIONS}
    return {"splits": per_split, "mean": mean}


def main(argv=None) -> int:
    from banana100.metrics.detector.evidence import SIGNATURE_DRAWS
    from bench.detector import component_variants as cv
    from bench.detector import signatures as sg

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cv.add_chain_arguments(ap)
    ap.add_argument("--splits", type=int, default=4, help="random halves of the sources (default 4)")
    ap.add_argument("--features", choices=("terms", "components", "both"), default="terms",
                    help="what the combinations read: the eight bare terms (default), the twelve components, or both")
    ap.add_argument("--out", help="default: bench/results/detector/learned_combination[_FEATURES].json")
    args = ap.parse_args(argv)
    out = Path(args.out or results_path(__file__, "" if args.features == "terms" else f"_{args.features}"))
    files = cv.development_chains(ap, args, sg.SIGNATURES)
    measured = cv.measure(files, variants={})
    chains, terms = term_array(measured)
    x = terms
    if args.features != "terms":
        components = component_array(measured, chains)
        x = components if args.features == "components" else np.concatenate([terms, components], axis=-1)
    result = compare(chains, x, args.splits, shipped=terms.sum(-1))
    print(f"held-out halves of the sources, mean of {args.splits} splits (AUC clean vs step 10, chains passed):")
    for n, by_group in result["mean"].items():
        print(f"  {n}: " + "; ".join(f"{g} {f['auc_clean_vs_step10']:.3f}, {f['passed']:g} of {f['chains']:g}"
                                     for g, f in by_group.items()))
    write_results(out, {
        "command": command_line("bench.detector.learned_combination", argv or sys.argv[1:], {args.cache: "DIR"}),
        "environment": environment(), "draws": [d.number for d in SIGNATURE_DRAWS[:args.draws]],
        "model_b_draws": list(range(1, args.model_b + 1)), "side": args.side, "splits": args.splits,
        "features": args.features, **result})
    print(f"written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
