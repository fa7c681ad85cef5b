"""Errors a user meets first: a path that is no dataset, a misspelt field or target.

Each must name what the user passed and what would work instead, at the
moment the reader or dataset is made (not at the first batch, which may run
inside a DataLoader worker), and the command line must print it as one line
with exit status 2.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import sds_factory
import signal_dataset as sds

import sds_loader
from sds_loader import cli
from sds_loader.dataset import ROOT_DOCUMENT


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("users") / "captures.sds"
    sds_factory.write_dataset(path, 4)
    return os.fspath(path)


@pytest.fixture(params=["missing", "file", "directory"])
def not_a_root(request, tmp_path) -> tuple[str, str]:
    """A path that is no dataset root, and the words that must say why."""
    if request.param == "missing":
        return os.fspath(tmp_path / "nope.sds"), "does not exist"
    if request.param == "file":
        path = tmp_path / "captures.array_record"
        path.write_bytes(b"not a dataset")
        return os.fspath(path), "is a file"
    path = tmp_path / "empty"
    path.mkdir()
    return os.fspath(path), f"holds no {ROOT_DOCUMENT}"


def signal_dataset_error(path: str) -> BaseException:
    try:
        sds.open(path)
    except Exception as exc:  # noqa: BLE001 - whatever it is, ours must keep it
        return exc
    raise AssertionError(f"signal_dataset opened {path}")


def test_a_path_that_is_no_dataset_is_named_with_what_a_root_holds(not_a_root):
    path, why = not_a_root
    with pytest.raises(sds_loader.DatasetNotFoundError) as caught:
        sds_loader.BatchReader(path)
    message = str(caught.value)
    assert path in message and why in message
    assert ROOT_DOCUMENT in message and "objects/" in message
    assert isinstance(caught.value, FileNotFoundError)
    original = signal_dataset_error(path)
    assert type(caught.value.__cause__) is type(original)
    assert str(caught.value.__cause__) == str(original)


def test_the_torch_dataset_names_the_path_too(not_a_root):
    import torch_required  # noqa: F401 - skips this test without torch

    from sds_loader.torch import SDSTorchDataset

    path, why = not_a_root
    with pytest.raises(sds_loader.DatasetNotFoundError, match=why):
        SDSTorchDataset(path)


@pytest.mark.parametrize("command", ["inspect", "verify", "bench"])
def test_the_command_line_prints_one_line_and_exits_2(capsys, not_a_root, command):
    path, why = not_a_root
    assert cli.main([command, path, "--no-progress"] if command != "inspect" else [command, path]) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith(f"sds-loader {command}: error: {path} ")
    assert why in captured.err and captured.err.count("\n") == 1
    assert "Traceback" not in captured.err + captured.out


def test_the_installed_command_has_no_traceback(tmp_path):
    missing = os.fspath(tmp_path / "nope.sds")
    done = subprocess.run(
        [sys.executable, "-m", "sds_loader", "inspect", missing], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2
    holds = sds_loader.dataset.WHAT_A_ROOT_HOLDS
    assert done.stderr == f"sds-loader inspect: error: {missing} does not exist; {holds}\n"


# -- names, checked when the reader is made -------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "error", "argument", "available"),
    [
        ({"fields": ("sample",)}, sds_loader.UnknownNameError, "fields=", "'samples'"),
        ({"fields": ("samples", "iq")}, sds_loader.UnknownNameError, "fields=", "'samples'"),
        ({"targets": ("lable",)}, sds_loader.TargetError, "targets=", "'label', 'snr_db'"),
    ],
)
def test_batch_reader_checks_names_when_made(root, kwargs, error, argument, available):
    with pytest.raises(error) as caught:
        sds_loader.BatchReader(root, **kwargs)
    message = str(caught.value)
    assert message.startswith(f"{argument} names ")
    assert f"are {available}." in message and root in message


@pytest.mark.parametrize(
    ("kwargs", "argument", "available"),
    [
        ({"inputs": "sample"}, "inputs=", "'samples'"),
        ({"target": "lable"}, "target=", "'label', 'snr_db'"),
        ({"fields": {"aux": "other"}}, "fields=", "'samples'"),
        ({"fields": {"inputs": "iq"}}, "fields=", "'samples'"),
        ({"targets": {"snr": "snr"}}, "targets=", "'label', 'snr_db'"),
    ],
)
def test_torch_dataset_names_the_argument_the_user_passed(root, kwargs, argument, available):
    import torch_required  # noqa: F401 - skips this test without torch

    from sds_loader.torch import SDSTorchDataset

    with pytest.raises(sds_loader.UnknownNameError) as caught:
        SDSTorchDataset(root, **kwargs)
    message = str(caught.value)
    assert message.startswith(f"{argument} names ")
    assert f"are {available}." in message
    other = {"inputs=": "fields=", "fields=": "inputs=", "target=": "targets=", "targets=": "target="}[
        argument
    ]
    assert other not in message


def test_bench_names_its_own_option(capsys, root, tmp_path):
    assert (
        cli.main(["bench", root, "--inputs", "sample", "--no-progress", "--out", os.fspath(tmp_path / "out")])
        == 2
    )
    err = capsys.readouterr().err
    assert "--inputs" in err and "'samples'" in err and "Traceback" not in err
