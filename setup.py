"""Build hook: ship the top-level catalogue (signatures/, workarounds/) inside the package.

The catalogue lives at the top of the repository so that contributors find it, but a
non-editable install (`pip install .`) only carries the package; this copies both trees
into `triage/catalogue/builtin/` of the built wheel.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent


class BuildWithCatalogue(build_py):
    def run(self) -> None:
        super().run()
        target = Path(self.build_lib) / "triage" / "catalogue" / "builtin"
        for name in ("signatures", "workarounds"):
            dest = target / name
            if dest.exists():
                shutil.rmtree(dest)
            shutil.copytree(ROOT / name, dest, ignore=shutil.ignore_patterns("*.pyc", ".*"))


setup(cmdclass={"build_py": BuildWithCatalogue})
