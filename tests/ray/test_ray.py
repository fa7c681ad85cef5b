"""Ray Data over SDS: `sds_loader.ray.read_sds` on a one-machine Ray cluster.

One Ray instance serves the whole module (starting Ray takes seconds), with
three logical CPUs: a TorchTrainer of two workers holds two, and the reads
need one more to be scheduled at all. The S3 credentials go into the
workers' environment when Ray starts, as they would be set on a cluster; the
endpoint travels with the read tasks. Datasets are small and written with
signal_dataset itself; every row read through Ray is compared with
signal_dataset's record byte for byte.
"""

from __future__ import annotations

import functools
import os
import pickle
import shutil
import threading
import time

import numpy as np
import pytest

if os.environ.get("SDS_LOADER_SANITIZED") == "1":
    pytest.skip(
        "Ray starts its own processes and forks workers, which this AddressSanitizer build cannot",
        allow_module_level=True,
    )
ray = pytest.importorskip("ray", reason="Ray is not installed: pip install 'sds-loader[ray]'")
pytest.importorskip("ray.data", reason="Ray Data is not installed: pip install 'sds-loader[ray]'")

import signal_dataset as sds  # noqa: E402
from native_required import _native  # noqa: E402,F401 - a build without it fails the run (conftest.py)
from rclone_server import CREDENTIALS as RCLONE_CREDENTIALS  # noqa: E402
from sds_factory import capture, data_shards, record_chunks, shard_ordinals, write_dataset  # noqa: E402

import sds_loader  # noqa: E402
from sds_loader.ray import SDSDatasource, read_sds, to_complex  # noqa: E402
from sds_loader.ray.datasource import passes_are_counted  # noqa: E402

RECORDS = 24
PER_SHARD = 8
make = functools.partial(capture, samples=256)


@pytest.fixture(scope="module")
def ray_cluster():
    context = ray.init(
        num_cpus=3,
        include_dashboard=False,
        log_to_driver=False,
        configure_logging=False,
        runtime_env={"env_vars": dict(RCLONE_CREDENTIALS)},
    )
    ray.data.DataContext.get_current().enable_progress_bars = False
    try:
        yield context
    finally:
        ray.shutdown()


@pytest.fixture(scope="module")
def captures(tmp_path_factory) -> str:
    """24 complex64 captures of 2x256 in 3 shards, label and snr_db in their metadata."""
    root = tmp_path_factory.mktemp("ray-captures")
    write_dataset(root, RECORDS, make, records_per_shard=PER_SHARD)
    return os.fspath(root)


def rows_by_ordinal(batches) -> dict[int, dict[str, np.ndarray]]:
    rows: dict[int, dict[str, np.ndarray]] = {}
    for batch in batches:
        for k, ordinal in enumerate(np.asarray(batch["ordinal"]).tolist()):
            assert ordinal not in rows, f"ordinal {ordinal} read twice"
            rows[ordinal] = {name: np.asarray(value[k]) for name, value in batch.items()}
    return rows


def assert_rows_match(root: str, rows: dict[int, dict[str, np.ndarray]], count: int) -> None:
    """Every ordinal once, each row signal_dataset's record byte for byte."""
    assert sorted(rows) == list(range(count))
    reference = sds.open(root)
    for ordinal, row in rows.items():
        record = reference[ordinal]
        expected = record["samples"].data
        assert row["samples"].dtype == expected.dtype and row["samples"].shape == expected.shape
        assert row["samples"].tobytes() == expected.tobytes(), ordinal
        assert row["label"] == record.metadata["label"]
        assert row["snr_db"] == record.metadata["snr_db"]


def test_count_schema_take_batch_and_a_full_pass(ray_cluster, captures):
    # Five tasks over three shards: two shards are split.
    dataset = read_sds(captures, fields=["samples"], targets=["label", "snr_db"], override_num_blocks=5)
    assert dataset.count() == RECORDS
    schema = dataset.schema()
    assert list(schema.names) == ["samples", "label", "snr_db", "ordinal"]
    samples_type = dict(zip(schema.names, schema.types, strict=True))["samples"]
    assert tuple(samples_type.shape) == (2, 256, 2), samples_type  # the float view of complex64

    first = dataset.take_batch(4)
    assert first["samples"].dtype == np.float32 and first["samples"].shape == (4, 2, 256, 2)
    taken = to_complex(first, ["samples"])
    reference = sds.open(captures)
    for k, ordinal in enumerate(first["ordinal"].tolist()):
        assert taken["samples"][k].tobytes() == reference[ordinal]["samples"].data.tobytes()

    rows = rows_by_ordinal(to_complex(b, ["samples"]) for b in dataset.iter_batches(batch_size=7))
    assert_rows_match(captures, rows, RECORDS)


def metadata_of(task):
    """A read task's metadata: a property in Ray 2.40 and later, a method in 2.34."""
    return task.metadata if hasattr(task, "metadata") else task.get_metadata()


def test_read_tasks_pickle_and_say_what_they_read(captures):
    # Planning needs no Ray cluster: only running the tasks does.
    source = SDSDatasource(captures, fields=["samples"], targets=["label", "snr_db"])
    owners = {ordinal: path for path, ordinals in shard_ordinals(captures).items() for ordinal in ordinals}
    for parallelism in (2, 5):
        tasks = source.get_read_tasks(parallelism)
        assert len(tasks) == parallelism
        read: list[int] = []
        for task in tasks:
            again = pickle.loads(pickle.dumps(task))
            tables = list(again())
            ordinals = [o for table in tables for o in table.column("ordinal").to_pylist()]
            metadata = metadata_of(task)
            assert metadata.num_rows == len(ordinals)
            assert metadata.size_bytes == sum(table.nbytes for table in tables)
            assert set(metadata.input_files) == {owners[o] for o in ordinals}
            read.extend(ordinals)
        assert read == list(range(RECORDS))  # stretches in order, without a shuffle
    assert source.estimate_inmemory_data_size() == sum(metadata_of(t).size_bytes for t in tasks)


def test_streaming_split_gives_disjoint_parts_that_cover_the_dataset(ray_cluster, captures):
    dataset = read_sds(captures, fields=["samples"], targets=["label", "snr_db"], override_num_blocks=6)
    parts = dataset.streaming_split(2)
    seen: list[list[int]] = [[], []]
    problems: list[BaseException] = []

    def consume(k: int) -> None:
        try:
            for batch in parts[k].iter_batches(batch_size=4):
                seen[k].extend(batch["ordinal"].tolist())
        except BaseException as error:  # noqa: BLE001 - reported by the test's thread
            problems.append(error)

    # streaming_split's parts are read together: each waits for the other's progress.
    threads = [threading.Thread(target=consume, args=(k,)) for k in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not problems, problems
    assert seen[0] and seen[1]
    assert not set(seen[0]) & set(seen[1])
    assert sorted(seen[0] + seen[1]) == list(range(RECORDS))


def test_local_shuffle_is_seeded_per_epoch_and_keeps_stretches(ray_cluster, captures):
    context = ray.data.DataContext.get_current()
    preserve = context.execution_options.preserve_order
    context.execution_options.preserve_order = True
    try:
        orders = {}
        for epoch in (0, 1):
            dataset = read_sds(captures, fields=["samples"], shuffle=True, seed=7, epoch=epoch)
            orders[epoch] = [o for b in dataset.iter_batches(batch_size=5) for o in b["ordinal"].tolist()]
        again = read_sds(captures, fields=["samples"], shuffle=True, seed=7, epoch=1)
        assert [o for b in again.iter_batches(batch_size=5) for o in b["ordinal"].tolist()] == orders[1]
        # Without an epoch, each pass over the same dataset is the next one.
        passes = read_sds(captures, fields=["samples"], shuffle=True, seed=7, override_num_blocks=3)
        first, second = (
            [o for b in passes.iter_batches(batch_size=5) for o in b["ordinal"].tolist()] for _ in "ab"
        )
    finally:
        context.execution_options.preserve_order = preserve
    for order in (orders[0], orders[1], first, second):
        assert sorted(order) == list(range(RECORDS))
    assert orders[0] != orders[1] and orders[0] != list(range(RECORDS))
    if passes_are_counted():
        assert first != second
    else:  # Ray before 2.54 does not tell a datasource which pass it plans
        assert first == second
    # Three tasks, one shard each: each task's rows are its shard's, permuted.
    for k in range(3):
        task = first[k * PER_SHARD : (k + 1) * PER_SHARD]
        assert len({o // PER_SHARD for o in task}) == 1 and task != sorted(task)


def test_a_dataset_in_s3_reads_as_its_local_copy(ray_cluster, rclone_dataset):
    uri, local = rclone_dataset
    dataset = read_sds(uri, fields=["samples"], targets=["label", "snr_db"], override_num_blocks=3)
    assert dataset.count() == len(sds.open(local))
    rows = rows_by_ordinal(to_complex(b, ["samples"]) for b in dataset.iter_batches(batch_size=16))
    assert_rows_match(local, rows, len(sds.open(local)))


def test_a_corrupt_shard_raises_through_ray_naming_the_shard(ray_cluster, captures, tmp_path):
    root = tmp_path / "damaged"
    shutil.copytree(captures, root)
    victim = data_shards(root)[1]
    chunk = record_chunks(victim)[2]
    with open(victim, "r+b") as file:  # one byte of the chunk's data: its hash no longer matches
        file.seek(chunk.physical(64))
        byte = file.read(1)
        file.seek(chunk.physical(64))
        file.write(bytes([byte[0] ^ 0xFF]))
    dataset = read_sds(os.fspath(root), fields=["samples"], override_num_blocks=3)
    with pytest.raises(sds_loader.CorruptShardError) as raised:
        for _ in dataset.iter_batches(batch_size=8):
            pass
    assert os.path.basename(victim) in str(raised.value)


def cpu_workers(count: int):
    """A ScalingConfig of `count` CPU workers and nothing else holding a CPU.

    Ray Train before its version 2 (the default since Ray 2.52 at the latest) runs a trainer
    actor of one CPU beside the workers, which on this three-CPU instance
    would leave none for the reads; version 2 refuses the setting.
    """
    from ray.train import ScalingConfig

    try:
        return ScalingConfig(num_workers=count, use_gpu=False, trainer_resources={"CPU": 0})
    except DeprecationWarning:
        return ScalingConfig(num_workers=count, use_gpu=False)


def test_torch_trainer_workers_read_disjoint_rows_covering_each_epoch(ray_cluster, captures, tmp_path):
    pytest.importorskip("torch", reason="Ray Train's TorchTrainer needs torch")
    pytest.importorskip("ray.train.torch", reason="Ray Train is not installed: pip install 'sds-loader[ray]'")
    from ray.train import RunConfig
    from ray.train.torch import TorchTrainer

    seen = tmp_path / "seen"
    seen.mkdir()

    def loop(config):
        import numpy as np
        import ray.train
        import torch

        shard = ray.train.get_dataset_shard("train")
        rank = ray.train.get_context().get_world_rank()
        for epoch in range(2):
            ordinals = []
            for batch in shard.iter_torch_batches(batch_size=4):
                assert batch["samples"].dtype == torch.float32 and batch["samples"].shape[1:] == (2, 256, 2)
                ordinals.extend(batch["ordinal"].tolist())
            np.save(os.path.join(config["seen"], f"{epoch}-{rank}.npy"), np.asarray(ordinals, dtype=np.int64))

    trainer = TorchTrainer(
        loop,
        train_loop_config={"seen": os.fspath(seen)},
        scaling_config=cpu_workers(2),
        datasets={"train": read_sds(captures, fields=["samples"], targets=["label"], override_num_blocks=6)},
        run_config=RunConfig(storage_path=os.fspath(tmp_path / "runs"), name="sds"),
    )
    trainer.fit()
    for epoch in range(2):
        parts = [np.load(seen / f"{epoch}-{rank}.npy").tolist() for rank in range(2)]
        assert parts[0] and parts[1], parts
        assert not set(parts[0]) & set(parts[1])
        assert sorted(parts[0] + parts[1]) == list(range(RECORDS))


def test_the_plan_grows_with_shards_not_records(tmp_path):
    # The driver keeps a few numbers per shard: ten times the records, the same plan.
    sizes = []
    for count in (RECORDS, 10 * RECORDS):
        root = tmp_path / f"records-{count:06d}"  # names of one length: the paths pickle alike
        write_dataset(root, count, functools.partial(capture, samples=16), records_per_shard=count // 3)
        source = SDSDatasource(os.fspath(root), fields=["samples"])
        sizes.append((len(pickle.dumps(source)), len(pickle.dumps(source.get_read_tasks(6)))))
    assert sizes[0] == sizes[1]


def test_bench_ray_times_the_three_ways(ray_cluster, tmp_path, capsys):
    from sds_loader.cli import main

    assert (
        main(
            ["bench", "--ray", "--builtin-records", "32", "--cache-dir", os.fspath(tmp_path), "--no-progress"]
        )
        == 0
    )
    printed = capsys.readouterr().out
    for label in ("BatchReader(threads=2)", "read_sds(...).iter_batches", "ray.data.range(n).map_batches"):
        line = next(line for line in printed.splitlines() if line.startswith(label))
        assert float(line.split()[-4].replace(",", "")) > 0, line
    assert "read_sds: " in printed and "x BatchReader alone" in printed
    assert "load average (1 min): " in printed


def test_windows_without_a_length_and_ragged_annotations_are_variable_shaped(ray_cluster, tmp_path):
    from annotation_factory import COUNT, record_length, row, status_of, write_annotated
    from signal_dataset.annotation import AnnotationStatus

    root = os.fspath(tmp_path / "annotated")
    reference = write_annotated(root)
    dataset = read_sds(
        root,
        fields=["samples"],
        window=sds_loader.Window("time", None, pad=True),
        annotations=[sds_loader.Annotations("bursts", ("intervals",))],
        extras=("id",),
        override_num_blocks=4,
    )
    assert set(dataset.schema().names) == {
        "samples",
        "samples_length",
        "bursts.intervals",
        "bursts.status",
        "id",
        "ordinal",
    }
    rows = rows_by_ordinal(dataset.iter_batches(batch_size=5))
    assert sorted(rows) == list(range(COUNT))
    for ordinal, got in rows.items():
        record = reference[ordinal]
        # Each row its own length: the whole capture, as signal_dataset stores it.
        assert got["samples"].shape == (record_length(ordinal),)
        assert got["samples"].tobytes() == record["samples"].data.tobytes()
        assert got["samples_length"] == record_length(ordinal)
        assert got["id"] == record.id
        written = row(reference, ordinal)
        if status_of(ordinal) is AnnotationStatus.SUCCESS and "intervals" in written.fields:
            expected = written.fields["intervals"].data
        else:
            expected = np.zeros((0, 2), dtype=np.int64)
        assert got["bursts.intervals"].shape == expected.shape, ordinal
        assert got["bursts.intervals"].tobytes() == expected.tobytes(), ordinal


def test_a_read_tasks_memory_is_reused_only_once_nothing_holds_it():
    import pyarrow as pa

    from sds_loader.ray.reused_blocks import ReusedBlocks

    pool = ReusedBlocks()
    first = pool((64, 2, 4096), np.dtype(np.complex64))
    first[...] = 1
    view = pa.py_buffer(first.view(np.float32).reshape(64, 2, 4096, 2))  # what a block keeps
    del first
    second = pool((64, 2, 4096), np.dtype(np.complex64))
    second[...] = 2
    assert (np.frombuffer(view, dtype=np.complex64) == 1).all()  # still busy: a fresh block was made
    del view, second
    third = pool((64, 2, 4096), np.dtype(np.complex64))
    assert len(pool._blocks) == 2 and any(third.base is block for block in pool._blocks)
    assert pool((4, 4), np.dtype(np.float32)).base is None  # small arrays are numpy's own


@pytest.mark.parametrize("tasks", [1, 2, 3, 4, 7, 40, 1000])
def test_stretches_cover_the_ordinals_along_the_shards(tasks):
    from sds_loader.ray.stretches import plan

    starts = np.array([0, 5, 6, 30, 31, 90])  # runs of 5, 1, 24, 1, 59 and 10 records
    ranges = plan(starts, 100, tasks)
    assert ranges[0][0] == 0 and ranges[-1][1] == 100
    assert all(lo < hi for lo, hi in ranges) and all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
    assert len(ranges) == min(tasks, 100) if tasks > len(starts) else len(ranges) <= tasks
    if tasks <= len(starts):  # whole shards only
        assert {lo for lo, _ in ranges} <= set(starts.tolist())
    else:  # every shard split into pieces of its own
        assert set(starts.tolist()) <= {lo for lo, _ in ranges}


def test_bad_arguments_fail_in_the_driver_naming_the_fix(captures):
    with pytest.raises(sds_loader.UnknownNameError, match="fields= names 'nope'.*'samples'"):
        read_sds(captures, fields=["nope"])
    with pytest.raises(ValueError, match="override_num_blocks must be a positive integer"):
        read_sds(captures, fields=["samples"], override_num_blocks=0)
    with pytest.raises(ValueError, match="to_complex: 'label' is int64"):
        to_complex({"label": np.arange(3)}, ["label"])
    with pytest.raises(KeyError, match="the batch has no 'samples'"):
        to_complex({"label": np.arange(3)}, ["samples"])


def test_reads_before_ray_knows_its_limits_run_one_task_a_cpu_in_this_dataset_alone(ray_cluster, captures):
    from sds_loader.ray import startup_budget

    if not startup_budget.AVAILABLE:
        pytest.skip("this Ray has no ResourceBudget policy to stand in for")
    key = startup_budget.ENABLED_BACKPRESSURE_POLICIES_CONFIG_KEY
    dataset = read_sds(captures, fields=["samples"], override_num_blocks=3)
    policies = dataset.context.get_config(key)
    assert startup_budget.StartupBudget in policies and startup_budget._RayBudget not in policies
    assert dataset.context.get_config(startup_budget.BLOCK_BYTES_KEY) > 0
    assert ray.data.DataContext.get_current().get_config(key) is None  # the process keeps Ray's
    assert pickle.loads(pickle.dumps(dataset.context)).get_config(key) == policies  # as it crosses to actors
    assert dataset.map_batches(lambda batch: batch).count() == RECORDS

    class Limits:
        def __init__(self, cpu: float) -> None:
            self.cpu = cpu
            self.object_store_memory = cpu * 1e9

    class Allocator:
        def can_submit_new_task(self, op) -> bool:
            return False  # what Ray's budget says while it reads zero

    class Manager:
        _op_resource_allocator = Allocator()

        def __init__(self, cpu: float, held: int) -> None:
            self.limits, self.held = Limits(cpu), held

        def get_global_limits(self):
            return self.limits

        def get_mem_op_outputs(self, op, include_ineligible_downstream=False) -> int:
            return self.held

        def max_task_output_bytes_to_read(self, op) -> int:
            return 0

    class Op:
        def __init__(self, name: str, running: int) -> None:
            self.name = name
            self.metrics = type("Metrics", (), {"num_tasks_running": running})()

        def incremental_resource_usage(self):
            return Limits(1.0)

    def policy(cpu: float = 0.0, held: int = 0):
        return startup_budget.StartupBudget(dataset.context, {}, Manager(cpu, held))

    # The count above has just given its CPUs back; Ray's view of what is free
    # catches up a moment later.
    deadline = time.monotonic() + 30
    while ray.available_resources().get("CPU", 0) < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    cpus = int(policy()._cpus)  # free as an execution begins
    assert cpus >= 1
    tasks = startup_budget.TASKS_PER_CPU * cpus
    block = dataset.context.get_config(startup_budget.BLOCK_BYTES_KEY)
    assert policy().can_add_input(Op("ReadSDS", tasks - 1))
    assert policy().max_task_output_bytes_to_read(Op("ReadSDS->MapBatches(f)", 0)) is None
    assert not policy().can_add_input(Op("ReadSDS", tasks))
    assert not policy().can_add_input(Op("ReadRange", 0))  # other operators: Ray's budget
    assert not policy(held=startup_budget.BLOCKS_PER_TASK * cpus * block).can_add_input(Op("ReadSDS", 0))
    assert not policy(cpu=cpus).can_add_input(Op("ReadSDS", 0))  # limits known: Ray's budget
    assert policy(cpu=cpus).max_task_output_bytes_to_read(Op("ReadSDS", 0)) == 0


def test_a_later_rays_private_classes_failing_at_run_time_leave_the_decision_to_rays_policy(
    ray_cluster, captures, caplog
):
    from sds_loader.ray import startup_budget

    if not startup_budget.AVAILABLE:
        pytest.skip("this Ray has no ResourceBudget policy to stand in for")
    dataset = read_sds(captures, fields=["samples"], override_num_blocks=3)

    class Allocator:
        def can_submit_new_task(self, op) -> bool:
            return False  # what Ray's budget says while it reads zero

    class Renamed:
        """A resource manager of a later Ray: the private method the pass asks is gone."""

        _op_resource_allocator = Allocator()

        def __init__(self) -> None:
            self.asked = 0

        def __getattr__(self, name: str):
            if name == "get_global_limits":
                self.asked += 1
                raise AttributeError(f"'ResourceManager' object has no attribute {name!r}")
            raise AttributeError(name)

        def max_task_output_bytes_to_read(self, op) -> int:
            return 0

    class Op:
        name = "ReadSDS"
        metrics = type("Metrics", (), {"num_tasks_running": 0})()

    deadline = time.monotonic() + 30
    while ray.available_resources().get("CPU", 0) < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    manager = Renamed()
    policy = startup_budget.StartupBudget(dataset.context, {}, manager)
    assert policy._cpus >= 1, "the pass would not have run: nothing tested"
    with caplog.at_level("WARNING", logger=startup_budget.__name__):
        assert policy.can_add_input(Op()) is False  # Ray's answer, not the pass's (True at 0 running)
        assert policy.max_task_output_bytes_to_read(Op()) == 0  # Ray's, not the pass's None
    assert manager.asked == 1, "the pass kept asking after the private call failed"
    assert any("its own backpressure policy decides" in record.getMessage() for record in caplog.records)
    assert dataset.map_batches(lambda batch: batch).count() == RECORDS
