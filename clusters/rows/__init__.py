"""The request row shared by every layer: its spec, state moves, lifecycle, usage ledger
and the nudges to the tasks."""
