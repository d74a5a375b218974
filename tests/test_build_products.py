"""What installing the package writes (`make install`: an editable pip install, which runs
setuptools) is a build product: git ignores it and nothing of it is committed, so an
install leaves `git status` clean."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _setuptools_products(tmp_path: Path) -> list[str]:
    """The files setuptools writes for this package (its metadata and its build tree),
    relative to the project root, made in a copy so the checkout is left alone."""
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    shutil.copytree(ROOT / "gangway_cli", tmp_path / "gangway_cli")
    sources = {p for p in tmp_path.rglob("*") if p.is_file()}
    setup = "import setuptools; setuptools.setup()"
    subprocess.run(
        [sys.executable, "-c", setup, "-q", "egg_info", "build_py"],
        cwd=tmp_path,
        check=True,
        capture_output=True,
    )
    written = [p for p in tmp_path.rglob("*") if p.is_file() and p not in sources]
    return sorted(str(p.relative_to(tmp_path)) for p in written)


def test_what_setuptools_writes_is_ignored_and_not_committed(tmp_path: Path) -> None:
    products = _setuptools_products(tmp_path)
    assert any(p.endswith(".egg-info/PKG-INFO") for p in products), products
    assert any(p.startswith("build/lib/gangway_cli/") for p in products), products

    # check-ignore without --no-index: a committed file is not ignored, whatever the rules.
    checked = subprocess.run(
        ["git", "check-ignore", "--verbose", "--non-matching", "--stdin"],
        cwd=ROOT,
        input="\n".join(products) + "\n",
        capture_output=True,
        text=True,
    )
    not_ignored = [
        line.split("\t", 1)[1] for line in checked.stdout.splitlines() if line.startswith("::")
    ]
    assert not_ignored == [], f"build products git would show: {not_ignored}"

    committed = subprocess.run(
        ["git", "ls-files", "--", "*.egg-info", "build"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert committed == []
