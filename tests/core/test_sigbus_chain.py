"""A SIGBUS that is not the reader's reaches every other handler once, and kills as it would.

The reader catches SIGBUS inside its own copies out of shard mappings (a
shard truncated under a reader raises CorruptShardError instead). Any other
SIGBUS, here a file the program mapped itself and then truncated, must go to
the handlers installed before and after the reader's exactly once each, and
the process must then die by SIGBUS, as the same program does without
sds_loader. A handler that chains to its predecessor (faulthandler, a crash
reporter written in C) must never be called back by the reader in a loop,
whatever the order in which the handlers were installed, including
faulthandler enabled again between batches.

Each program runs in a child interpreter. Its steps: `read` reads a batch
(checked against signal_dataset), `fh` enables faulthandler, `fhoff`
disables it, `c` installs a C handler that announces itself and chains to
the handler it replaced, `fork` goes on in a forked child, `mapped` checks
that the reader's next reads may copy out of its mappings, and `bus`
touches a page of a file the program mapped and truncated.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
from functools import partial

import pytest
from native_required import _native  # noqa: E402, F401
from sds_factory import capture, write_dataset

DUMP = "Fatal Python error: Bus error"
C_MARK = "C handler ran"

C_HANDLER = textwrap.dedent(
    r"""
    #include <signal.h>
    #include <string.h>
    #include <unistd.h>

    static struct sigaction previous;

    static void on_sigbus(int signal, siginfo_t* info, void* context) {
      static const char mark[] = "C handler ran\n";
      (void)!write(2, mark, sizeof(mark) - 1);
      if (previous.sa_flags & SA_SIGINFO) {
        previous.sa_sigaction(signal, info, context);
      } else if (previous.sa_handler == SIG_DFL || previous.sa_handler == SIG_IGN) {
        /* The faulting access runs again and meets the default action. */
        sigaction(signal, &previous, NULL);
      } else {
        previous.sa_handler(signal);
      }
    }

    int install(void) {
      struct sigaction ours;
      memset(&ours, 0, sizeof(ours));
      ours.sa_sigaction = on_sigbus;
      ours.sa_flags = SA_SIGINFO | SA_NODEFER;
      sigemptyset(&ours.sa_mask);
      return sigaction(SIGBUS, &ours, &previous);
    }
    """
)

CHILD = textwrap.dedent(
    """
    import ctypes, faulthandler, mmap, os, signal, sys

    root, library, scratch, steps, use_reader = sys.argv[1:6]
    use_reader = use_reader == "1"
    if use_reader:
        import signal_dataset as sds
        import sds_loader
        reader = sds_loader.BatchReader(root, fields=["samples"], threads=2)
        reference = sds.open(root)
    handlers = ctypes.CDLL(library)

    for step in steps.split(","):
        if step == "read":
            if not use_reader:
                continue
            batch = [0, 3, 5, 6]
            samples = reader.read(batch)["samples"]
            for row, index in enumerate(batch):
                assert samples[row].tobytes() == reference[index]["samples"].data.tobytes(), index
            print("read", flush=True)
        elif step == "fh":
            faulthandler.enable()
        elif step == "fhoff":
            faulthandler.disable()
        elif step == "c":
            assert handlers.install() == 0
        elif step == "fork":
            # The rest runs in a forked child, as in a DataLoader worker; the
            # parent ends as the child ended.
            pid = os.fork()
            if pid:
                code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
                if code < 0:
                    signal.signal(-code, signal.SIG_DFL)
                    os.kill(os.getpid(), -code)
                sys.exit(code)
        elif step == "mapped":
            if use_reader:
                from sds_loader import _native
                assert _native.mapped_reads_guarded(), "reads would not copy out of mappings"
        elif step == "bus":
            with open(scratch, "wb") as file:
                file.write(b"x" * 8192)
            with open(scratch, "r+b") as file:
                mapped = mmap.mmap(file.fileno(), 8192)
            os.truncate(scratch, 0)
            print("touching", flush=True)
            mapped[4096]
            print("survived a SIGBUS", flush=True)
            sys.exit(3)
    """
)

PROGRAMS = [
    # Only the reader's handler.
    "read,bus",
    # faulthandler first, the reader's over it.
    "fh,read,bus",
    # The reported loop: faulthandler enabled after the first batch, a batch, enabled again.
    "read,fh,read,fh,bus",
    # faulthandler re-enabled (disabled, enabled) between batches.
    "read,fh,read,fhoff,fh,read,bus",
    # faulthandler gone again: the reader's handler is first once more.
    "read,fh,read,fhoff,read,bus",
    # A chaining C handler before the reader's, after it, and beside faulthandler.
    "c,read,bus",
    "read,c,read,bus",
    "read,c,fh,read,bus",
    "fh,c,read,fh,read,bus",
    # A forked child (a DataLoader worker) that installs a handler of its own
    # before it reads: the reader's goes over it there and copies out of its
    # mappings, as in a child of a process that never read.
    "read,fork,c,mapped,read,bus",
    "read,fork,fh,mapped,read,bus",
    "read,fork,read,c,read,bus",
]


def expected_marks(steps: str) -> tuple[int, int]:
    """(faulthandler dumps, C handler runs) the program prints without sds_loader."""
    faulthandler_on = False
    for step in steps.split(","):
        if step == "fh":
            faulthandler_on = True
        elif step == "fhoff":
            faulthandler_on = False
    return int(faulthandler_on), int("c" in steps.split(","))


@pytest.fixture(scope="module")
def setting(tmp_path_factory):
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("needs a C compiler to build the chaining handler")
    base = tmp_path_factory.mktemp("sigbus")
    source = base / "chain.c"
    source.write_text(C_HANDLER)
    library = base / "libchain.so"
    subprocess.run([compiler, "-shared", "-fPIC", "-o", os.fspath(library), os.fspath(source)], check=True)
    root = base / "data"
    write_dataset(root, 8, partial(capture, samples=2048), writer_options="group_size:1,uncompressed")
    return os.fspath(root), os.fspath(library), base


def run(setting, steps: str, use_reader: bool) -> subprocess.CompletedProcess:
    root, library, base = setting
    scratch = base / f"scratch-{steps.replace(',', '-')}-{int(use_reader)}"
    return subprocess.run(
        [sys.executable, "-c", CHILD, root, library, os.fspath(scratch), steps, "1" if use_reader else "0"],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("steps", PROGRAMS)
def test_an_unrelated_sigbus_reaches_each_handler_once_and_kills(setting, steps):
    if "fork" in steps.split(",") and os.environ.get("SDS_LOADER_SANITIZED") == "1":
        # The child forks while the reader's threads run: GCC 12's AddressSanitizer
        # keeps no allocator lock across fork(), so the forked child can wait
        # forever (tests/conftest.py). The plain suite runs it.
        pytest.skip("forks while threads run, which this AddressSanitizer build cannot do safely")
    dumps, c_runs = expected_marks(steps)
    # The program without the reader behaves as expected_marks says: the baseline.
    alone = run(setting, steps, use_reader=False)
    assert alone.returncode == -signal.SIGBUS, alone.stdout + alone.stderr
    assert (alone.stderr.count(DUMP), alone.stderr.count(C_MARK)) == (dumps, c_runs), alone.stderr

    child = run(setting, steps, use_reader=True)
    output = child.stdout + child.stderr
    assert child.stdout.count("read\n") == steps.split(",").count("read"), output
    assert "touching" in child.stdout, output
    assert child.returncode == -signal.SIGBUS, f"exit {child.returncode}\n{output}"
    assert child.stderr.count(DUMP) == dumps, output
    assert child.stderr.count(C_MARK) == c_runs, output
