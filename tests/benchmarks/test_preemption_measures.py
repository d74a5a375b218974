"""The scheduling benchmark's preemption run at its quick size (a quarter of a day, one
seed, in this process): both scenes under the three policies, the goals' verdicts, and
no work lost by runs that checkpoint on notice."""

from __future__ import annotations

from benchmarks.preemption_measures import (
    NEW,
    NEW_BACK,
    POLICIES,
    SCENES,
    TODAY,
    measure,
    preemption_run,
)


def test_the_quick_preemption_run_has_a_row_per_scene_and_policy() -> None:
    section = preemption_run(0.25, [19], workers=1)
    assert section.startswith("### Preemption and fairness over the week (issue 49)")
    for scene in SCENES:
        for policy in POLICIES:
            assert f"| {scene} | {policy} |" in section
            assert f"- {scene}, {policy}: " in section
    assert "Goals: " in section and "lost GPU-hours cut by" in section


def test_with_notice_the_heavy_and_light_day_loses_no_work() -> None:
    today, _ = measure(SCENES[1], TODAY, 19, 1)
    assert today.reclaims > 0 and today.lost_gpu_hours > 0
    for policy in (NEW, NEW_BACK):
        new, _ = measure(SCENES[1], policy, 19, 1)
        assert new.lost_gpu_hours == 0
        assert new.weekly_jain is not None
