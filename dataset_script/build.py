"""Build the Banana100 dataset folder from run folders: the same as `banana100 build-dataset`.

    python dataset_script/build.py runs/replicate runs/mirror --out banana100-dataset --num-proc 4

The builder itself is `banana100.dataset.build` (`build_dataset`); this file is where a Hub user
looks for it, so it stays a thin entry point.
"""

import sys

from banana100.cli import main

if __name__ == "__main__":
    sys.exit(main(["build-dataset", *sys.argv[1:]]))
