"""Run the benchmark from a source checkout: `python benchmarks/run.py [bench options]`.

The same as `sds-loader bench`; the measurement code lives in
src/sds_loader/cli/bench so that an installed package can run it too.
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

from sds_loader.cli import main  # noqa: E402

if __name__ == "__main__":
    raise SystemExit(main(["bench", *sys.argv[1:]]))
