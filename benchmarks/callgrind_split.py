"""Splits the instructions of callgrind runs into what a read spends them on.

    python benchmarks/callgrind_split.py SHORT.out LONG.out [--records N]

With two profiles of benchmarks/short_records_profile.py that differ only in
--batches, every bucket is LONG minus SHORT: what the extra batches cost,
with imports, dataset writing and opening the reader cancelled out. With one
profile, the whole run. `--records` (the extra batches' records) adds
instructions per record.

Buckets go by each function's own (exclusive) cost, first match wins, so a
build with symbols (RelWithDebInfo) names the native functions.
"""

from __future__ import annotations

import argparse
import re
import subprocess
from collections import Counter

BUCKETS = [
    ("zstd", re.compile(r"third_party/zstd/|libzstd|:(ZSTD_|HUF_|FSE_|HIST_)")),
    ("hashing", re.compile(r"highwayhash|HighwayHash|RiegeliHash", re.I)),
    ("memmove/memcpy", re.compile(r"mem(move|cpy)", re.I)),
    ("memset", re.compile(r"memset", re.I)),
    (
        "JSON (headers, descriptors)",
        re.compile(
            r"rapidjson|nlohmann|csrc/record/|Descriptor|SafeTensors|JsonNumber|JsonEvents|KeySet",
        ),
    ),
    (
        "malloc/free",
        re.compile(
            r"\b(_int_)?(malloc|free|realloc|calloc)\b|malloc_consolidate|operator new|operator delete"
            r"|cfree|tcache|unlink_chunk"
        ),
    ),
    ("numpy", re.compile(r"numpy|_multiarray")),
    ("native (other)", re.compile(r"sds_loader/_native|/csrc/|sdsl::")),
    ("Python", re.compile(r"python3|libpython|Python/|Objects/|Modules/|Include/|\?\?\?:_?Py")),
]


def costs(path: str, functions: Counter[tuple[str, str]] | None = None) -> Counter[str]:
    text = subprocess.run(
        ["callgrind_annotate", "--threshold=100", "--inclusive=no", "--auto=no", path],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    buckets: Counter[str] = Counter()
    line_re = re.compile(r"^\s*([\d,]+)\s+(?:\([^)]*\)\s+)?(.*)$")
    started = False
    for line in text.splitlines():
        if "file:function" in line:
            started = True
            continue
        if not started:
            if line.strip().endswith("PROGRAM TOTALS"):
                buckets["total"] = int(line.split()[0].replace(",", ""))
            continue
        match = line_re.match(line)
        if not match:
            continue
        instructions = int(match.group(1).replace(",", ""))
        name = match.group(2)
        for bucket, pattern in BUCKETS:
            if pattern.search(name):
                break
        else:
            bucket = "other"
        buckets[bucket] += instructions
        if functions is not None:
            functions[(bucket, name)] += instructions
    return buckets


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("profiles", nargs="+")
    parser.add_argument("--records", type=int, default=0)
    parser.add_argument("--top", type=int, default=0, help="list each bucket's N costliest functions")
    args = parser.parse_args()
    if len(args.profiles) not in (1, 2):
        parser.error("one profile, or two to subtract")
    functions: Counter[tuple[str, str]] = Counter()
    split = costs(args.profiles[-1], functions)
    if len(args.profiles) == 2:
        earlier: Counter[tuple[str, str]] = Counter()
        split.subtract(costs(args.profiles[0], earlier))
        functions.subtract(earlier)
    total = split.pop("total")
    names = [name for name, _ in BUCKETS] + ["other"]
    print(
        f"{'bucket':<30} {'instructions':>15} {'share':>7}" + (f" {'per record':>11}" if args.records else "")
    )
    for name in names:
        value = split.get(name, 0)
        per = f" {value / args.records:>11,.0f}" if args.records else ""
        print(f"{name:<30} {value:>15,} {value / total:>7.1%}{per}")
    per = f" {total / args.records:>11,.0f}" if args.records else ""
    print(f"{'total':<30} {total:>15,} {1:>7.1%}{per}")
    for name in names if args.top else ():
        print(f"\n{name}:")
        ranked = sorted(((v, f) for (b, f), v in functions.items() if b == name), reverse=True)
        for value, function in ranked[: args.top]:
            print(f"  {value:>13,}  {function[:150]}")


if __name__ == "__main__":
    main()
