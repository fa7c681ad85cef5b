"""A bounded fuzzing run of every native parser, plus replay of past crashers.

Builds the libFuzzer targets in fuzz/ (AddressSanitizer and
UndefinedBehaviorSanitizer, Debian's clang) into fuzz/build, cuts seeds from
real shards with fuzz/make_seeds.py, runs every target for a short, bounded
time, and replays each input kept in fuzz/regressions/<target>/. Every run
must exit 0: libFuzzer exits non-zero on a crash, a sanitizer report, a leak,
a timeout or running out of memory.

Skipped, with the reason, where clang, libFuzzer's runtime or cmake is missing.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys

import pytest
from repo_paths import REPO

ROOT = REPO
FUZZ = os.path.join(ROOT, "fuzz")
BUILD = os.environ.get("SDS_LOADER_FUZZ_BUILD", os.path.join(FUZZ, "build"))
TARGETS = ("fuzz_chunk_walk", "fuzz_simple_chunk", "fuzz_shard_index", "fuzz_safetensors", "fuzz_augment")
#: Seconds each target fuzzes; the targets run side by side.
SECONDS = int(os.environ.get("SDS_LOADER_FUZZ_SECONDS", "20"))

pytestmark = pytest.mark.slow


def _compilers() -> tuple[str, str] | None:
    for cc, cxx in (("clang", "clang++"), ("clang-14", "clang++-14")):
        if shutil.which(cc) and shutil.which(cxx):
            return cc, cxx
    return None


def _unavailable() -> str | None:
    if shutil.which("cmake") is None:
        return "cmake is not installed"
    compilers = _compilers()
    if compilers is None:
        return "clang is not installed (scripts/bootstrap.sh installs clang-14 and libclang-rt-14-dev)"
    runtime = subprocess.run(
        [compilers[1], "-print-file-name=libclang_rt.fuzzer-x86_64.a"], capture_output=True, text=True
    ).stdout.strip()
    if not os.path.isabs(runtime) or not os.path.exists(runtime):
        return "clang has no libFuzzer runtime (install libclang-rt-14-dev)"
    return None


@pytest.fixture(scope="module")
def fuzzers() -> dict[str, str]:
    reason = _unavailable()
    if reason:
        pytest.skip(reason)
    cc, cxx = _compilers()
    env = dict(os.environ, CC=cc, CXX=cxx)
    if not os.path.exists(os.path.join(BUILD, "CMakeCache.txt")):
        generator = ["-G", "Ninja"] if shutil.which("ninja") else []
        subprocess.run(
            [
                "cmake",
                "-S",
                ROOT,
                "-B",
                BUILD,
                "-DSDS_LOADER_FUZZ=ON",
                "-DCMAKE_BUILD_TYPE=RelWithDebInfo",
                *generator,
            ],
            check=True,
            env=env,
            capture_output=True,
        )
    built = subprocess.run(
        ["cmake", "--build", BUILD, "-j", str(os.cpu_count() or 2)], env=env, capture_output=True, text=True
    )
    assert built.returncode == 0, built.stdout[-4000:] + built.stderr[-4000:]
    paths = {target: os.path.join(BUILD, "fuzz", target) for target in TARGETS}
    for path in paths.values():
        assert os.access(path, os.X_OK), path
    return paths


@pytest.fixture(scope="module")
def seeds(fuzzers) -> str:
    out = os.path.join(BUILD, "seeds")
    subprocess.run([sys.executable, os.path.join(FUZZ, "make_seeds.py"), out], check=True)
    for target in TARGETS:
        assert glob.glob(os.path.join(out, target, "*")), f"no seeds for {target}"
    return out


def _tail(path: str) -> str:
    with open(path, errors="replace") as file:
        return file.read()[-3000:]


def test_regressions_replay_cleanly(fuzzers):
    for target, binary in fuzzers.items():
        inputs = sorted(glob.glob(os.path.join(FUZZ, "regressions", target, "*")))
        # Every target keeps at least its deepest seed, so a replay always runs.
        assert inputs, f"fuzz/regressions/{target}/ holds no inputs"
        run = subprocess.run(
            [binary, "-rss_limit_mb=2048", "-timeout=20", *inputs],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert run.returncode == 0, f"{target} fails on a regression input:\n{run.stderr[-3000:]}"
        executed = run.stderr.count("Executed ")
        assert executed == len(inputs), (
            f"{target} ran {executed} of {len(inputs)} inputs:\n{run.stderr[-3000:]}"
        )


def test_every_target_fuzzes_cleanly(fuzzers, seeds, tmp_path):
    runs = {}
    for target, binary in fuzzers.items():
        corpus = tmp_path / f"{target}-corpus"
        artifacts = tmp_path / f"{target}-artifacts"
        corpus.mkdir()
        artifacts.mkdir()
        log = open(tmp_path / f"{target}.log", "w")
        command = [
            binary,
            f"-max_total_time={SECONDS}",
            "-rss_limit_mb=2048",
            "-timeout=20",
            "-print_final_stats=1",
            f"-artifact_prefix={artifacts}/",
            str(corpus),
            os.path.join(seeds, target),
        ]
        runs[target] = (subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT), log, artifacts)
    failures = []
    for target, (process, log, artifacts) in runs.items():
        try:
            code = process.wait(timeout=SECONDS + 90)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            code = "hung"
        log.close()
        crashers = sorted(os.listdir(artifacts))
        if code != 0 or crashers:
            failures.append(f"{target}: exit {code}, artifacts {crashers}\n{_tail(log.name)}")
    assert not failures, "\n\n".join(failures)
