"""Everything else is in pyproject.toml; this file only ships ``casstore-offline.pth``.

The ``.pth`` file goes to the top of site-packages, in a wheel (``pip install casstore``,
``pip install .``) and in an editable install (``pip install -e .``, PEP 660). Python runs
its one line at every start-up: it costs one environment lookup, and only in a child of a
guarded offline parent (``CASSTORE_GUARD_CHILDREN`` set) does it import
``casstore.replay.child``, which installs the offline guard when the child imports an HTTP
client (see that module and docs/replay.md, "Child processes").
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from setuptools import setup
from setuptools.command.build_py import build_py

PTH_NAME = "casstore-offline.pth"
PTH_LINE = (
    "import os; os.environ.get('CASSTORE_GUARD_CHILDREN', '').strip().lower() not in ('', '0', 'false', 'no', 'off') "
    "and __import__('casstore.replay.child').replay.child.arm()\n"
)


class BuildPyWithPth(build_py):
    """build_py that also writes the .pth file at the root of the wheel."""

    def run(self) -> None:
        super().run()
        if not getattr(self, "editable_mode", False):
            Path(self.build_lib, PTH_NAME).write_text(PTH_LINE, encoding="utf-8")

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:  # type: ignore[override]
        outputs = list(super().get_outputs(include_bytecode))
        if getattr(self, "editable_mode", False):
            return outputs
        return [*outputs, str(Path(self.build_lib, PTH_NAME))]


class _StrategyWithPth:
    """An editable install's strategy that also writes the .pth file into the editable wheel."""

    def __init__(self, strategy: Any) -> None:
        self.strategy = strategy

    def __call__(self, wheel: Any, files: Any, mapping: Any) -> None:
        self.strategy(wheel, files, mapping)
        wheel.writestr(PTH_NAME, PTH_LINE.encode("utf-8"))

    def __enter__(self) -> _StrategyWithPth:
        self.strategy.__enter__()
        return self

    def __exit__(self, *exc: Any) -> Any:
        return self.strategy.__exit__(*exc)


cmdclass: dict[str, Any] = {"build_py": BuildPyWithPth}
try:
    from setuptools.command.editable_wheel import editable_wheel
except ImportError:  # setuptools before 64: no PEP 660 editable installs
    pass
else:

    class EditableWheelWithPth(editable_wheel):  # type: ignore[misc,valid-type]
        def _select_strategy(self, *args: Any, **kwargs: Any) -> Any:
            return _StrategyWithPth(super()._select_strategy(*args, **kwargs))

    cmdclass["editable_wheel"] = EditableWheelWithPth

setup(cmdclass=cmdclass)
