"""How a simulated Ray driver behaves when its RayJob's annotations do not say: the
simulator's defaults, set from the fleet file, the CLI or a test (kubesim/README.md,
*Simulated Ray drivers*)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kubesim.operators import raycheckpoint

OUTCOMES = ("succeeded", "failed")


@dataclass
class RayJobDefaults:
    """How a simulated driver behaves when its RayJob's annotations do not say."""

    run_seconds: float = 5.0
    outcome: str = "succeeded"
    message: str = ""
    pending_seconds: float = 1.0
    # ``on-notice``: drivers checkpoint on a preemption notice; ``every-<n>s``: each n
    # seconds of work (``raycheckpoint.py``).
    checkpoint: str = ""

    @classmethod
    def from_fleet(cls, fleet: dict[str, Any]) -> RayJobDefaults:
        """The fleet file's optional ``rayjobs: {runSeconds, pendingSeconds, outcome,
        message}``."""
        spec = fleet.get("rayjobs") or {}
        out = cls()
        out.update(
            run_seconds=spec.get("runSeconds"),
            outcome=spec.get("outcome"),
            message=spec.get("message"),
            pending_seconds=spec.get("pendingSeconds"),
        )
        return out

    def update(
        self,
        run_seconds: float | None = None,
        outcome: str | None = None,
        message: str | None = None,
        pending_seconds: float | None = None,
        checkpoint: str | None = None,
    ) -> None:
        """Change the given defaults (None keeps one); refuses nonsense with ValueError."""
        if checkpoint is not None:
            if not raycheckpoint.valid(checkpoint):
                raise ValueError(
                    f"checkpoint must be '', {raycheckpoint.ON_NOTICE!r} or 'every-<n>s', "
                    f"not {checkpoint!r}"
                )
            self.checkpoint = checkpoint
        if run_seconds is not None:
            if float(run_seconds) < 0:
                raise ValueError("run_seconds must not be negative")
            self.run_seconds = float(run_seconds)
        if pending_seconds is not None:
            if float(pending_seconds) < 0:
                raise ValueError("pending_seconds must not be negative")
            self.pending_seconds = float(pending_seconds)
        if outcome is not None:
            if outcome not in OUTCOMES:
                raise ValueError(f"outcome must be one of {OUTCOMES}, not {outcome!r}")
            self.outcome = outcome
        if message is not None:
            self.message = str(message)
