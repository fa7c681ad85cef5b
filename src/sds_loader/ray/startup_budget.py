"""Read tasks one a CPU while Ray Data does not yet know the cluster's resources.

Ray Data (2.60, with its autoscaling coordinator) learns each execution's
resources from an actor, asynchronously: the first answer of every execution
is empty, and the executor keeps it for a second. With nothing to budget, it
runs one task at a time, and only once the consumer has drained the last one,
so a pass over a gigabyte on two CPUs spends half its time on one. Read tasks
are the whole of a `read_sds` pass, and what they hold is known: a block
each, at most Ray's target size.

`install` puts `StartupBudget` in the place of Ray's ResourceBudget policy in
one dataset's own `DataContext` (each dataset keeps a copy of its own), so
other datasets of the process keep Ray's policies unchanged. While the limits
read zero, the SDS read operator may submit two tasks for each CPU free as
the execution began, so long as its blocks in the object store stay under
four a CPU; once the limits are known, every call is Ray's policy's. Ray
versions without that policy, or whose policies are configured otherwise,
are left as they are; and where a later Ray's private classes answer
otherwise at run time, the pass gives way to Ray's policy for the rest of
the execution instead of failing it.

Two a CPU, not one: measured on one node of 2 CPUs (Ray 2.60, `sds-loader
bench --ray`), with one a CPU submitted Ray ran them one after another on
a single worker, the second queued behind the first, though Ray Data
counted two running; with two a CPU, it ran one on each CPU's worker, the
rest waiting in Ray's queue, which holds no CPU.
"""

from __future__ import annotations

import logging
from typing import Any

import ray
from ray.data import DataContext

logger = logging.getLogger(__name__)

#: Where the dataset's context keeps the most bytes one of its blocks holds.
BLOCK_BYTES_KEY = "sds_loader.startup_block_bytes"
#: Blocks in the object store per free CPU before the limits are known: a done one the consumer
#: batches, its prefetch, and one more each as the tasks finish together.
BLOCKS_PER_TASK = 4
#: Tasks submitted per free CPU before the limits are known (the module's docstring says why two).
TASKS_PER_CPU = 2
#: Names of the operators this applies to: `SDSDatasource.get_name` prefixed by Ray, fused or not.
OPERATOR_PREFIX = "ReadSDS"

try:
    from ray.data._internal.execution.backpressure_policy import (
        ENABLED_BACKPRESSURE_POLICIES,
        ENABLED_BACKPRESSURE_POLICIES_CONFIG_KEY,
    )
    from ray.data._internal.execution.backpressure_policy.resource_budget_backpressure_policy import (
        ResourceBudgetBackpressurePolicy,
    )

    _RayBudget: Any = ResourceBudgetBackpressurePolicy
except ImportError:  # pragma: no cover - depends on the Ray version
    _RayBudget = None

#: Whether this Ray has the policy `StartupBudget` stands in for.
AVAILABLE = _RayBudget is not None
_Base: Any = _RayBudget if AVAILABLE else object


class StartupBudget(_Base):  # type: ignore[misc]
    """Ray's ResourceBudget policy, but for SDS reads before the execution's limits are known."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        context = getattr(self, "_data_context", None)  # older policies keep no context
        self._block_bytes = int(context.get_config(BLOCK_BYTES_KEY, 0)) if context is not None else 0
        # The CPUs free as the execution begins: those other work holds
        # (training workers, other datasets) are not this read's to take.
        self._cpus = 0.0
        if self._block_bytes > 0 and ray.is_initialized():
            try:
                self._cpus = float(ray.available_resources().get("CPU", 0))  # type: ignore[no-untyped-call]
            except Exception:  # noqa: BLE001 - no count of free CPUs: Ray's policy decides
                self._cpus = 0.0

    @property
    def name(self) -> str:
        return "ResourceBudget"

    def _tasks_before_limits(self, op: Any) -> int:
        """How many tasks `op` may run now, or 0 where Ray's policy decides.

        What it asks of Ray is private (the resource manager, an operator's
        metrics): should a later Ray answer otherwise, the error ends this
        pass for the execution and Ray's own policy decides from then on,
        rather than the error failing the execution.
        """
        if self._cpus <= 0:
            return 0
        try:
            return self._startup_tasks(op)
        except Exception as error:  # noqa: BLE001 - whatever a later Ray changed, Ray's policy decides
            self._cpus = 0.0
            logger.warning(
                "this Ray's executor answers otherwise than Ray 2.60's (%s: %s); its own backpressure "
                "policy decides from here on",
                type(error).__name__,
                error,
            )
            return 0

    def _startup_tasks(self, op: Any) -> int:
        if not str(op.name).startswith(OPERATOR_PREFIX):
            return 0
        limits = self._resource_manager.get_global_limits()
        if limits.cpu > 0 or limits.object_store_memory > 0:
            return 0
        per_task = float(op.incremental_resource_usage().cpu) or 1.0
        tasks = TASKS_PER_CPU * int(self._cpus // per_task)
        # Blocks its tasks have yet to finish are bounded by the tasks' count;
        # those done, by the consumer's pace.
        held = self._resource_manager.get_mem_op_outputs(op, include_ineligible_downstream=True)
        if held >= BLOCKS_PER_TASK * max(tasks // TASKS_PER_CPU, 1) * self._block_bytes:
            return 0
        return tasks

    def can_add_input(self, op: Any) -> bool:
        tasks = self._tasks_before_limits(op)
        if tasks > 0:
            running = getattr(getattr(op, "metrics", None), "num_tasks_running", None)
            if isinstance(running, int):
                return running < tasks
        return bool(super().can_add_input(op))

    def max_task_output_bytes_to_read(self, op: Any) -> int | None:
        if self._tasks_before_limits(op) > 0:
            return None
        result: int | None = super().max_task_output_bytes_to_read(op)
        return result


def install(context: DataContext, block_bytes: int) -> bool:
    """Let the SDS reads of `context`'s executions run one task a CPU before Ray knows its limits.

    `block_bytes` is the most one block holds. False where this Ray has no
    such policy to stand in for, or `context` names policies of its own.
    """
    if not AVAILABLE:  # pragma: no cover - depends on the Ray version
        return False
    policies = context.get_config(ENABLED_BACKPRESSURE_POLICIES_CONFIG_KEY, ENABLED_BACKPRESSURE_POLICIES)
    if StartupBudget in policies:
        context.set_config(
            BLOCK_BYTES_KEY, max(int(block_bytes), int(context.get_config(BLOCK_BYTES_KEY, 0)))
        )
        return True
    if _RayBudget not in policies:
        logger.debug("backpressure policies %s set by the caller: Ray's first second left as it is", policies)
        return False
    replaced = [StartupBudget if policy is _RayBudget else policy for policy in policies]
    context.set_config(ENABLED_BACKPRESSURE_POLICIES_CONFIG_KEY, replaced)
    context.set_config(BLOCK_BYTES_KEY, int(block_bytes))
    return True
