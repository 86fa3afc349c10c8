"""The README's and docs/space.md's picture of the Space (docs/space.png), made from scratch in one go.

    BANANA100_WEIGHTS=../shared/iqa-params python docs/make_screenshot.py            # writes docs/space.png

It builds the Space's offline demo set in a fresh cache (drawn sources, simulated chains, a
dataset folder, the scores of PIQE, NIQE and BRISQUE where their parameter files are at hand,
and the edit_damage detector: everything the page plots), starts `space/app.py` on it with no
network, opens it in headless Chromium (`apt-get install chromium`; playwright from the `dev`
extra) and saves the Explore tab as it first appears. Nothing in the picture is drawn by hand:
rerun it whenever the Space changes what it shows.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))  # the Space tests' launcher and browser helpers

from spacetools import browser_page, launched_app, wait_first_load  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=REPO / "docs" / "space.png", help="PNG to write (default: docs/space.png)")
    ap.add_argument("--size", default="1280x1400", help="browser viewport WIDTHxHEIGHT (default: 1280x1400)")
    ap.add_argument("--keep", type=Path, default=None, help="keep the Space's cache here (default: a temporary folder)")
    args = ap.parse_args(argv)
    width, height = (int(v) for v in args.size.lower().split("x"))
    work = Path(tempfile.mkdtemp(prefix="banana100-screenshot-"))
    cache = args.keep or work / "banana100-space"
    env = {"BANANA100_SPACE_CACHE": str(cache), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "GRADIO_ANALYTICS_ENABLED": "False"}
    for k in ("SPACE_ID", "BANANA100_SPACE_DATASET", "BANANA100_SPACE_RELEASE"):  # the offline demo set, as on first start
        os.environ.pop(k, None)
    t0 = time.monotonic()
    try:
        # the first start builds the demo set before the page answers: minutes on a small machine
        with launched_app(work / "app", env, timeout=3600) as (url, netlog, log):
            print(f"the Space answered after {time.monotonic() - t0:.0f} s; {url}", flush=True)
            with browser_page(width, height) as page:
                wait_first_load(page, url, timeout_ms=600_000)
                time.sleep(1.0)  # the plots' last paint
                args.out.parent.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(args.out), full_page=False)
            tried = netlog.read_text().strip()
            if tried:
                print(f"warning: the Space tried to reach {tried.splitlines()}", file=sys.stderr)
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    print(f"wrote {args.out} ({time.monotonic() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
