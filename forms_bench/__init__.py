"""The form benchmark of AdvSim2Real: form-filling tasks in five skill strata.

- :func:`load` returns the frozen, checksum-verified 150-task test set (30 per stratum);
- :func:`generate` makes training pools (disjoint seeds and names, never the test set);
- :mod:`forms_bench.html` renders a task as a real HTML page, :mod:`forms_bench.server` serves
  it, :mod:`forms_bench.oracle` solves it, :mod:`forms_bench.actions` defines the action syntax.
"""

from forms_bench.generate import generate
from forms_bench.schema import STRATA, Task, TaskValidationError, validate_task
from forms_bench.suite import TEST_SET_VERSION, build_test_set, load, select_tasks

__all__ = ["STRATA", "Task", "TaskValidationError", "generate", "load", "build_test_set",
           "validate_task", "TEST_SET_VERSION"]
