"""Record the run that shows fitting is not monotone in the limit: the eager program under 1,000 MiB.

    python scripts/record_nonmonotone.py [--limit-mib 1000] [--out fixtures/fit]

``memtrace fit fixtures/fit/eager.xplane.pb.gz`` says the eager program (its source is in
``fixtures/fit/eager.json``, recorded by ``scripts/record_fit.py``) fits under 814 MiB, TF's own
boundary, but runs out of memory under 1,000 MiB: a 300 MiB ``Fill`` finds its largest free chunk
9,728 bytes too small. This runs the program once under ``TF_CPU_BFC_MEM_LIMIT_IN_MB=LIMIT`` on
TF's CPU BFC allocator (one inter-op and one intra-op thread, the profiler started right after
``import tensorflow`` as in the other recordings) and keeps TF's own evidence: the process's
output (``OUT/eager.LIMITmib.log``, with the "ran out of memory trying to allocate" line) and the
allocator's ``MemoryDump`` of its last failed attempt (``OUT/eager.LIMITmib.memdump.pb``, from
``TF_BFC_MEMORY_DUMP``). tests/test_fit_recorded.py holds the model's prediction to them.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

RUNNER = """\
import os, sys
os.environ["TF_CPU_ALLOCATOR_USE_BFC"] = "true"
import tensorflow as tf
tf.profiler.experimental.start(sys.argv[2])
try:
    exec(compile(open(sys.argv[1]).read(), sys.argv[1], "exec"), {"__name__": "__main__"})
finally:
    tf.profiler.experimental.stop()
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit-mib", type=int, default=1000)
    parser.add_argument("--out", type=Path, default=ROOT / "fixtures" / "fit")
    args = parser.parse_args()
    source = json.loads((args.out / "eager.json").read_text())["source"]
    with tempfile.TemporaryDirectory() as tmp:
        program, runner = Path(tmp, "eager.py"), Path(tmp, "runner.py")
        program.write_text(source)
        runner.write_text(RUNNER)
        env = dict(os.environ, TF_CPU_ALLOCATOR_USE_BFC="true", TF_CPU_BFC_MEM_LIMIT_IN_MB=str(args.limit_mib),
                   TF_CPP_MIN_LOG_LEVEL="0", TF_BFC_MEMORY_DUMP=str(Path(tmp, "dump")))
        done = subprocess.run([sys.executable, str(runner), str(program), str(Path(tmp, "profile"))],
                              capture_output=True, text=True, env=env, check=False)
        stem = args.out / f"eager.{args.limit_mib}mib"
        Path(f"{stem}.log").write_text(done.stdout + done.stderr)
        dumps = sorted(glob.glob(str(Path(tmp, "dump")) + "_*"))
        if dumps:
            shutil.copyfile(dumps[-1], f"{stem}.memdump.pb")
        print(f"exit {done.returncode}; {len(dumps)} dumps; kept {stem}.log" + (" and .memdump.pb" if dumps else ""))


if __name__ == "__main__":
    main()
