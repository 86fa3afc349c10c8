"""Where the tests find the repository and `../shared` (read in place, never copied): one place."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
PARAMS = SHARED / "iqa-params"
REFERENCE_IMAGES = SHARED / "reference-images"
