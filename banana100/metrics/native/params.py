"""Readers of the original parameter files (no converted copies).

- NIQE `modelparameters.mat`: `mu_prisparam` (1x36) and `cov_prisparam` (36x36).
- LIVE BRISQUE LIBSVM text files: the model `allmodel` (svm-train output) and the feature
  ranges `allrange` (svm-scale `-s` output).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from banana100.errors import ParameterFileError


def _fail(path, what: str) -> ParameterFileError:
    return ParameterFileError(f"{path}: {what}")


def read_niqe_mat(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """(mu (d,), cov (d, d)) float64 from a NIQE `.mat` with `mu_prisparam` and `cov_prisparam`."""
    import scipy.io

    try:
        mat = scipy.io.loadmat(str(path))
    except FileNotFoundError:
        raise _fail(path, "file not found") from None
    except (
        ValueError,
        TypeError,
        OSError,
        scipy.io.matlab.MatReadError,
    ) as e:  # not a .mat file
        raise _fail(path, f"not a readable MATLAB .mat file ({e})") from None
    for key in ("mu_prisparam", "cov_prisparam"):
        if key not in mat:
            found = ", ".join(k for k in mat if not k.startswith("__")) or "none"
            raise _fail(path, f"no variable {key!r} (variables found: {found})")
    mu = np.asarray(mat["mu_prisparam"], dtype=np.float64).ravel()
    cov = np.asarray(mat["cov_prisparam"], dtype=np.float64)
    d = mu.size
    if cov.shape != (d, d):
        raise _fail(
            path,
            f"cov_prisparam is {cov.shape}, expected ({d}, {d}) to match mu_prisparam",
        )
    if not (np.isfinite(mu).all() and np.isfinite(cov).all()):
        raise _fail(path, "mu_prisparam / cov_prisparam hold non-finite values")
    return mu, cov


@dataclass(frozen=True)
class SVRModel:
    """An RBF epsilon-SVR read from a LIBSVM model file: f(x) = sum_i coef_i exp(-gamma |x - sv_i|^2) - rho."""

    gamma: float
    rho: float
    coef: np.ndarray  # (n_sv,)
    support_vectors: (
        np.ndarray
    )  # (n_sv, n_features), dense, zeros where the file omits an index


@dataclass(frozen=True)
class FeatureRange:
    """svm-scale ranges: features are mapped from [min_i, max_i] to [lower, upper]."""

    lower: float
    upper: float
    feature_min: np.ndarray  # (n_features,)
    feature_max: np.ndarray


def _read_lines(path: Path) -> list[str]:
    try:
        text = Path(path).read_text(encoding="ascii")
    except FileNotFoundError:
        raise _fail(path, "file not found") from None
    except (UnicodeDecodeError, OSError) as e:
        raise _fail(path, f"not a readable LIBSVM text file ({e})") from None
    return text.splitlines()


def _float(path, lineno: int, token: str, what: str) -> float:
    try:
        return float(token)
    except ValueError:
        raise _fail(path, f"line {lineno}: {what} {token!r} is not a number") from None


def read_libsvm_model(path: Path) -> SVRModel:
    """Read a LIBSVM RBF epsilon-SVR model file (header lines, then `SV`, then `coef i:v ...` lines)."""
    lines = _read_lines(path)
    header: dict[str, list[str]] = {}
    body_start = None
    for i, line in enumerate(lines):
        parts = line.split()
        if not parts:
            continue
        if parts[0] == "SV":
            body_start = i + 1
            break
        header[parts[0]] = parts[1:]
    if body_start is None:
        raise _fail(path, "no 'SV' line: not a LIBSVM model file")
    for key in ("svm_type", "kernel_type", "gamma", "rho", "total_sv"):
        if key not in header or not header[key]:
            raise _fail(path, f"header has no {key!r} line")
    if header["svm_type"][0] != "epsilon_svr":
        raise _fail(
            path, f"svm_type is {header['svm_type'][0]!r}, expected 'epsilon_svr'"
        )
    if header["kernel_type"][0] != "rbf":
        raise _fail(
            path, f"kernel_type is {header['kernel_type'][0]!r}, expected 'rbf'"
        )
    gamma = _float(path, 0, header["gamma"][0], "gamma")
    rho = _float(path, 0, header["rho"][0], "rho")
    try:
        total_sv = int(header["total_sv"][0])
    except ValueError:
        raise _fail(
            path, f"total_sv {header['total_sv'][0]!r} is not an integer"
        ) from None

    coefs, rows = [], []
    for lineno, line in enumerate(lines[body_start:], start=body_start + 1):
        parts = line.split()
        if not parts:
            continue
        coefs.append(_float(path, lineno, parts[0], "coefficient"))
        row = {}
        for tok in parts[1:]:
            index, sep, value = tok.partition(":")
            if not sep or not index.isdigit() or int(index) < 1:
                raise _fail(path, f"line {lineno}: {tok!r} is not an index:value pair")
            row[int(index)] = _float(path, lineno, value, f"value of feature {index}")
        rows.append(row)
    if len(rows) != total_sv:
        raise _fail(
            path,
            f"header says total_sv {total_sv} but {len(rows)} support vectors follow",
        )
    n_features = max((max(r) for r in rows if r), default=0)
    if n_features == 0:
        raise _fail(path, "the support vectors hold no features")
    sv = np.zeros((total_sv, n_features), dtype=np.float64)
    for i, row in enumerate(rows):
        for j, v in row.items():
            sv[i, j - 1] = v
    return SVRModel(
        gamma=gamma,
        rho=rho,
        coef=np.asarray(coefs, dtype=np.float64),
        support_vectors=sv,
    )


def read_libsvm_range(path: Path) -> FeatureRange:
    """Read an svm-scale range file: `x`, then `lower upper`, then `index min max` lines."""
    lines = [
        (i + 1, line.split())
        for i, line in enumerate(_read_lines(path))
        if line.strip()
    ]
    if not lines or lines[0][1] != ["x"]:
        raise _fail(
            path,
            "first line must be 'x' (svm-scale feature ranges; 'y' ranges are not supported)",
        )
    if len(lines) < 3 or len(lines[1][1]) != 2:
        raise _fail(path, "second line must be 'lower upper'")
    lower = _float(path, lines[1][0], lines[1][1][0], "lower bound")
    upper = _float(path, lines[1][0], lines[1][1][1], "upper bound")
    ranges: dict[int, tuple[float, float]] = {}
    for lineno, parts in lines[2:]:
        if len(parts) != 3 or not parts[0].isdigit() or int(parts[0]) < 1:
            raise _fail(
                path,
                f"line {lineno}: expected 'index min max', got {' '.join(parts)!r}",
            )
        lo = _float(path, lineno, parts[1], "minimum")
        hi = _float(path, lineno, parts[2], "maximum")
        ranges[int(parts[0])] = (lo, hi)
    n = max(ranges)
    if sorted(ranges) != list(range(1, n + 1)):
        raise _fail(path, f"feature indices are not 1..{n} without gaps")
    fmin = np.array([ranges[i][0] for i in range(1, n + 1)], dtype=np.float64)
    fmax = np.array([ranges[i][1] for i in range(1, n + 1)], dtype=np.float64)
    return FeatureRange(lower=lower, upper=upper, feature_min=fmin, feature_max=fmax)
