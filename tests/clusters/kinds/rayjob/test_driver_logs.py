"""A job's driver output within bounds (clusters.kinds.rayjob.driver_logs; the bounds are
clusters.live.log_bounds): the query's bounds
are checked as the schema says, and the tail keeps the newest lines within the byte
limit, saying when it cut. Reading the submitter pod is covered end to end in
``tests/clusters/engine/test_jobs.py``."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import ValidationError

from clusters.kinds.rayjob.driver_logs import driver_log
from clusters.live.log_bounds import MAX_TAIL, LogBounds, bounded
from clusters.models import Job, Workload


def test_bounds_default_and_refuse_what_is_not_a_plain_whole_number() -> None:
    assert LogBounds.parse({}) == LogBounds()
    assert LogBounds.parse({"tail": "20", "limit_bytes": "100"}) == LogBounds(20, 100)
    for bad in ("0", "+5", "1_000", " 5", "٣", str(MAX_TAIL + 1)):
        with pytest.raises(ValidationError) as refused:
            LogBounds.parse({"tail": bad})
        assert "tail" in refused.value.message_dict


def test_the_tail_keeps_the_newest_lines_within_the_byte_limit() -> None:
    text = "".join(f"line {i}\n" for i in range(10))
    assert bounded(text, LogBounds(tail=20, limit_bytes=1000)) == (text, False)
    assert bounded(text, LogBounds(tail=2, limit_bytes=1000)) == ("line 8\nline 9\n", True)
    kept, cut = bounded(text, LogBounds(tail=20, limit_bytes=9))
    assert (kept, cut) == ("8\nline 9\n", True)  # the last 9 bytes
    # A cut inside a multibyte character drops the partial character, not the log.
    assert bounded("é" * 4, LogBounds(tail=5, limit_bytes=3)) == ("é", True)


@pytest.mark.django_db
def test_a_job_that_has_not_started_has_no_output(make_cluster: Any) -> None:
    row = make_cluster(name="bob-job", workload=Workload.JOB)
    row.save()
    Job.objects.create(request=row, entrypoint="python run.py")
    found = driver_log(row, LogBounds())
    assert (found.origin, found.text) == ("none", "")
    assert found.message == "The job has not started yet: no output."
