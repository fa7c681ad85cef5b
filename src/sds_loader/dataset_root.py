"""Open a dataset root, and say what one is when the path is not one.

`signal_dataset.open` reports a wrong path as the file it looked for: a
directory that holds no dataset answers "No such file or directory:
'root.json'", naming neither the path the caller passed nor what belongs
there. Every place sds-loader opens a dataset goes through `open_dataset`,
which raises `DatasetNotFoundError` naming the path and its problem (missing,
a file, a directory without root.json), with signal_dataset's own error kept
as the cause. It subclasses FileNotFoundError, so code that caught
signal_dataset's error still catches this one.
"""

from __future__ import annotations

import os
from typing import Any

import signal_dataset as sds

#: The document `signal_dataset.publish` writes at the top of every dataset.
ROOT_DOCUMENT = "root.json"

WHAT_A_ROOT_HOLDS = (
    "a dataset root is the directory signal_dataset.publish writes, holding root.json, "
    "the snapshot it names and objects/ with the shards (`sds-loader synth PATH` writes one to try)"
)


class DatasetNotFoundError(FileNotFoundError):
    """The path is missing, is a file, or is a directory that holds no dataset.

    The message names the path and what a dataset root holds;
    ``__cause__`` is the error signal_dataset raised.
    """


def open_dataset(uri: str, **options: Any) -> sds.Dataset:
    """`signal_dataset.open(uri, **options)`, with an error that names `uri` if it is no dataset root."""
    try:
        return sds.open(uri, **options)
    except (FileNotFoundError, NotADirectoryError) as exc:
        raise DatasetNotFoundError(problem(uri, exc)) from exc


def problem(uri: str, error: OSError) -> str:
    """What is wrong with `uri` as a dataset root, given the error opening it raised."""
    if "://" in uri and not uri.startswith("file://"):
        return f"no dataset at {uri} ({error}); {WHAT_A_ROOT_HOLDS}"
    path = uri.removeprefix("file://")
    if not os.path.lexists(path):
        parent = os.path.dirname(os.path.abspath(path))
        where = "" if os.path.isdir(parent) else f" (nor does its parent {parent})"
        return f"{uri} does not exist{where}; {WHAT_A_ROOT_HOLDS}"
    if not os.path.isdir(path):
        return f"{uri} is a file, not a dataset root; {WHAT_A_ROOT_HOLDS}"
    if not os.path.exists(os.path.join(path, ROOT_DOCUMENT)):
        return (
            f"{uri} is a directory but not a dataset root: it holds no {ROOT_DOCUMENT}; {WHAT_A_ROOT_HOLDS}"
        )
    # root.json is there, so something it names is not: the dataset is incomplete.
    return f"dataset {uri} is incomplete: {error}"
