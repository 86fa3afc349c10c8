"""The metrics a command runs when it is not told which: those whose files are here or can be fetched now.

`banana100 score` without --metrics and `banana100 demo` start from a default set (PIQE, NIQE,
BRISQUE). NIQE's and BRISQUE's parameter files are small (under 400 KB in all): when one is
missing and its host can be reached, it is downloaded now, with one line saying what and from
where (and the downloader's progress bar). Offline, one warning names every metric left out and
the one command that adds them; the callers check their inputs first, so that warning is the
first line a user sees.
"""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)

#: a missing file is fetched without being asked for only up to this size (parameter files, not checkpoints)
SMALL_FILE_BYTES = 20_000_000


def _size(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 1e6 else f"{max(1, round(n / 1e3))} KB"


def _fetch(metric: str, filenames: list[str]) -> str:
    """Download `metric`'s missing `filenames` when all are small; "" on success, else why not."""
    from urllib.parse import urlparse

    from banana100.errors import WeightsNotFoundError
    from banana100.metrics.table import get_metric
    from banana100.metrics.weights import hub_unreachable, resolved_files

    files = [wf for wf in get_metric(metric).backend_files() if wf.filename in filenames]
    if any(wf.size is None or wf.size > SMALL_FILE_BYTES for wf in files):
        return "not a small parameter file"
    for wf in files:  # one quick probe per host first, so that offline the first line is the warning
        why_not = hub_unreachable(url=wf.download_url)
        if why_not:
            return why_not
    hosts = ", ".join(dict.fromkeys(urlparse(wf.download_url).netloc for wf in files))
    log.info("fetching %s for %s (%s) from %s", ", ".join(filenames), metric, _size(sum(wf.size for wf in files)),
             hosts)
    try:
        resolved_files(metric, allow_download=True)
    except WeightsNotFoundError as e:  # unreachable host, 404: the metric is skipped, the reason said once
        return getattr(e, "why_not", "") or str(e).splitlines()[0]
    return ""


def metrics_at_hand(candidates, download: bool = True) -> list[str]:
    """The `candidates` whose files are present, in order, after fetching the small missing ones
    when online (`download`; never with HF_HUB_OFFLINE=1). The ones left out are named in one
    warning, with the command that adds them."""
    from banana100.metrics.weights import ENV_VAR, missing, offline

    lacking = {m: files for m in candidates if (files := missing(m))}
    reasons = []
    if lacking and download and not offline():
        for m in list(lacking):
            why_not = _fetch(m, lacking[m])
            if why_not:
                reasons.append(why_not)
            else:
                del lacking[m]
    elif lacking and offline():
        reasons.append("HF_HUB_OFFLINE=1")
    if lacking:
        names = list(lacking)
        files = "; ".join(f"{m}: {', '.join(f)}" for m, f in lacking.items())
        why = f" ({'; '.join(dict.fromkeys(reasons))})" if reasons else ""
        log.warning("skipping %s: parameter files not here%s (%s); `banana100 weights download %s` adds them "
                    "online, or put them in $%s", ", ".join(names), why, files, " ".join(names), ENV_VAR)
    return [m for m in candidates if m not in lacking]
