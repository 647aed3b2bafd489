"""Regenerate the pictures of the docs as headless Chromium draws the pages.

``python scripts/screenshot_report.py`` (needs Debian's ``chromium``) writes:

- ``docs/report-alexnet.png``: the AlexNet fixture's report as it opens, each chart on the part of
  the step where its allocator's memory rises and falls;
- ``docs/img/fit-address-space.png``: ``memtrace fit --html`` of the Keras CNN run in
  ``fixtures/fit/`` (from the allocator's birth: a long start-up, then three steps), 1400 pixels
  wide, the picture opening on the steps.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from memtrace.cli import main as memtrace

ROOT = Path(__file__).resolve().parent.parent
PAGES = [  # (the memtrace command, before -o PAGE), the picture, the window
    (["report", "fixtures/alexnet_train_gpu.pbtxt"], ROOT / "docs" / "report-alexnet.png", "1200,1400"),
    (["fit", "fixtures/fit/cnn.xplane.pb.gz", "--html"], ROOT / "docs" / "img" / "fit-address-space.png", "1400,940"),
]


def main() -> int:
    browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if browser is None:
        print("needs headless Chromium: apt-get install chromium", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as scratch:
        for command, target, window in PAGES:
            page = Path(scratch) / "page.html"
            if memtrace([*command, "-o", str(page)]) not in (0, 1):  # (fit: 1 where it does not fit)
                return 1
            subprocess.run(
                [
                    browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                    "--disable-background-networking", "--disable-component-update", "--disable-sync",
                    "--hide-scrollbars", f"--user-data-dir={scratch}/profile", f"--window-size={window}",
                    f"--screenshot={target}", page.as_uri(),
                ],
                check=True, capture_output=True, timeout=180,
            )
            print(f"wrote {target} ({target.stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
