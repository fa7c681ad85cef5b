"""The helper process behind `fallback`: signal_dataset's reader in a fresh interpreter.

Started as `python -c "from sds_loader.fallback_helper import main; main()"` with pipes on stdin and
stdout. A fresh interpreter rather than a fork, because the hazard is
inherited: a process that has used array_record at all, writing a dataset
included, forks children whose array_record reads crash. A plain subprocess
also works from a daemonic DataLoader worker, which multiprocessing forbids to
have children.

The protocol is pickled frames, each prefixed by its length: first the
dataset to open (its URI, the store's settings and the reader's
`fallback.ReadSettings`), then one `(function name, args)` call per request, each
answered by `("ok", value)` or `("error", exception)`. The helper exits when
its stdin closes, so it never outlives the process that started it.
"""

from __future__ import annotations

import os

from sds_loader import fallback
from sds_loader.fallback_protocol import answerable, receive, send
from sds_loader.storage.stores import for_this_process


def main() -> None:
    # Frames go to the original stdout; anything else printed goes to stderr.
    requests = os.fdopen(os.dup(0), "rb")
    answers = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    try:
        uri, store, settings = receive(requests)
    except EOFError:
        return
    try:
        dataset = fallback.open_dataset(uri, for_this_process(store), settings)
        send(answers, ("ok", None))
    except BaseException as exc:  # noqa: BLE001 - reported to the caller
        send(answers, ("error", answerable(exc)))
        return
    while True:
        try:
            name, args = receive(requests)
        except EOFError:
            return
        try:
            value = getattr(fallback, name)(dataset, *args)
        except BaseException as exc:  # noqa: BLE001 - reported to the caller
            send(answers, ("error", answerable(exc)))
        else:
            send(answers, ("ok", value))


if __name__ == "__main__":
    main()
