"""The layer contracts of ``.importlinter`` hold, and each kind of them can fail.

``make test`` runs ``lint-imports`` on the product; these tests run it on a copy of the
product's packages into which one forbidden import was written, and check that the
contract guarding against it breaks — a contract that cannot fail would prove nothing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = (
    "gangway_cli",
    "clusters",
    "notifications",
    "tenants",
    "controlplane",
    "frontend",
    "kubesim",
)
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _lint(tree: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(tree / ".importlinter"), "--no-cache"],
        cwd=tree,
        env={**os.environ, "PYTHONPATH": str(tree)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """The product's packages (Python sources only) and the contracts, copied."""
    for package in PACKAGES:
        shutil.copytree(
            ROOT / package,
            tmp_path / package,
            ignore=shutil.ignore_patterns("__pycache__", "static", "templates", "fleets", "crds"),
        )
    shutil.copy(ROOT / ".importlinter", tmp_path / ".importlinter")
    return tmp_path


def test_the_product_keeps_every_contract() -> None:
    result = _lint(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert ", 0 broken." in result.stdout, result.stdout


@pytest.mark.parametrize(
    ("module", "statement", "contract"),
    [
        # The Kubernetes layer reaching up into the REST interface.
        ("clusters/kube/gateway.py", "import clusters.api.views", "clusters/ follows the flow"),
        # The engine reaching up into the services.
        ("clusters/engine/deletion.py", "import clusters.requests.services", "follows the flow"),
        # Sending a notice reaching up into the tasks that call it.
        ("notifications/sending.py", "import notifications.tasks", "notifications/ follows"),
        # The tenants app's rows reaching up into its services.
        ("tenants/models/tenancy.py", "import tenants.services", "tenants/ follows the flow"),
        # clusters reaching up into notifications (it must need no call of them).
        ("clusters/rows/transitions.py", "import notifications.outbox", "Product packages are"),
        # The pure decision importing Django.
        ("clusters/admission/counts_in_words.py", "import django.db", "clusters/admission is pure"),
        # tenants reaching up into clusters.
        ("tenants/selectors.py", "import clusters.models", "Product packages are layered"),
        # Two sibling modules importing each other.
        ("clusters/domain/states.py", "import clusters.rows.transitions", "No import cycles"),
        # kubesim borrowing the product's code, and the product importing the simulator.
        ("kubesim/util.py", "import clusters.kube.labels", "imports nothing of the product"),
        ("clusters/kube/gateway.py", "import kubesim.store", "Nothing of the product imports"),
        # The command line reaching into the server instead of asking its API.
        ("gangway_cli/client.py", "import clusters.models", "The command line speaks only"),
        ("gangway_cli/output.py", "import django.conf", "The command line speaks only"),
    ],
)
def test_a_forbidden_import_breaks_its_contract(
    tree: Path, module: str, statement: str, contract: str
) -> None:
    assert _lint(tree).returncode == 0, "the copy must keep every contract before the change"
    path = tree / module
    path.write_text(path.read_text() + f"\n{statement}  # injected by the test\n")
    result = _lint(tree)
    assert result.returncode != 0, result.stdout
    broken = result.stdout.split("Broken contracts")[-1]
    assert contract in broken, result.stdout
