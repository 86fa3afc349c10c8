"""The Space offers the Gemini editor only where it can run: where the gemini extra (google-genai)
is installed. The Hub's Space installs `banana100[space]` alone, so there the choice must not be
offered, and a request naming it is refused as an unknown editor before any key is asked for."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from banana100 import extras
from banana100.chains.editors.gemini import KEY_ENV  # unset below: the choice must not lean on a key
from fixtures.repopaths import REPO

pytest.importorskip("gradio", reason="the Space tests need `pip install -e .[dev]`")

# imported as on the Hub: builds its tiny demo set, then reports what "Try it" offers
PROBE = """
import importlib.util, json, sys
if sys.argv[1] == "without":
    sys.modules["google.genai"] = None  # the extra absent, as in the Hub's Space
spec = importlib.util.spec_from_file_location("banana100_space_app", sys.argv[2])
app = importlib.util.module_from_spec(spec)
spec.loader.exec_module(app)
try:
    next(app.run_live(None, app.ex.sample_names()[0], 1, "gemini", ""))
    said = ""
except Exception as e:
    said = getattr(e, "message", str(e))  # gr.Error keeps its text in .message
print(json.dumps({"gemini": app.GEMINI, "said": said}))
"""


def _offered(tmp_path, genai: str) -> dict:
    env = {**os.environ, "BANANA100_SPACE_CACHE": str(tmp_path / "cache"), "BANANA100_SPACE_DEMO": "1x20x64",
           "BANANA100_SPACE_DEMO_METRICS": "piqe", "BANANA100_SPACE_DATASET": "", "BANANA100_SPACE_SCORES": "",
           "GRADIO_ANALYTICS_ENABLED": "False"}
    for name in ("SPACE_ID", "BANANA100_SPACE_RELEASE", *KEY_ENV):
        env.pop(name, None)
    proc = subprocess.run([sys.executable, "-c", PROBE, genai, str(REPO / "space" / "app.py")], env=env,
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.integration
def test_gemini_is_not_offered_without_its_extra(tmp_path):
    seen = _offered(tmp_path, "without")
    assert seen["gemini"] is False
    assert seen["said"] == "choose an editor from the list"


@pytest.mark.integration
@pytest.mark.skipif(not extras.extra_installed("gemini"), reason="needs the gemini extra (google-genai)")
def test_gemini_is_offered_with_its_extra_and_asks_for_the_key(tmp_path):
    seen = _offered(tmp_path, "with")
    assert seen["gemini"] is True
    assert seen["said"].startswith("paste your Gemini API key")
