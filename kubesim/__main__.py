"""Command line: ``python -m kubesim --port 6443 --config fleet.yaml --kubeconfig-out PATH``."""

from __future__ import annotations

import argparse
import gc
import json
import signal
import sys
import threading
from pathlib import Path
from types import FrameType

import yaml

from kubesim.cluster import DEFAULT_EVENT_TTL
from kubesim.fleet import DEMO_FLEET
from kubesim.localproc import clear_root
from kubesim.operators.kueue import parse_feature_gates
from kubesim.operators.kueue.devices import parse_mappings
from kubesim.operators.kueue.mkconfig import parse_settings
from kubesim.sim import KubeSim
from kubesim.store import DEFAULT_WATCH_HISTORY
from kubesim.watch import DEFAULT_BOOKMARK_INTERVAL


def _positive_seconds(text: str) -> float:
    """A TTL in seconds; refused unless positive."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive: {text!r}")
    return value


def _feature_gates(text: str) -> str:
    """Check ``--kueue-feature-gates`` at parse time."""
    try:
        parse_feature_gates(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _multikueue(text: str) -> dict[str, object]:
    """Check ``--multikueue-config`` (JSON) at parse time."""
    try:
        raw = json.loads(text)
        if not isinstance(raw, dict):
            raise ValueError("want a JSON object")
        parse_settings(raw)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return raw


def _kueue_config(path: str) -> dict[str, object]:
    """Read and check ``--kueue-config`` (Kueue's Configuration, YAML or JSON) at parse time."""
    try:
        raw = yaml.safe_load(Path(path).read_text())
        if not isinstance(raw, dict):
            raise ValueError("want a Configuration object")
        parse_mappings(raw)
    except (OSError, ValueError, yaml.YAMLError) as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return raw


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The CLI's options."""
    p = argparse.ArgumentParser(
        prog="python -m kubesim", description="A simulated GPU Kubernetes cluster on loopback."
    )
    p.add_argument("--port", type=int, default=6443, help="port to listen on (0: any free)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on")
    p.add_argument("--config", default=DEMO_FLEET, help="fleet YAML (default: the demo fleet)")
    p.add_argument("--kubeconfig-out", default=None, help="write a kubeconfig here")
    p.add_argument(
        "--startup-delay", type=float, default=0.0, help="seconds before a bound pod is Running"
    )
    p.add_argument("--kueue", action="store_true", help="emulate Kueue admission")
    p.add_argument(
        "--kueue-feature-gates",
        type=_feature_gates,
        default=None,
        help="Kueue feature gates over v0.19's defaults, as Kueue's --feature-gates "
        "(e.g. ElasticJobsViaWorkloadSlices=false)",
    )
    p.add_argument(
        "--kueue-config",
        type=_kueue_config,
        default=None,
        help="Kueue's Configuration file (config.kueue.x-k8s.io/v1beta2, YAML), of which "
        "resources.deviceClassMappings is read: the DRA device classes Kueue counts",
    )
    p.add_argument(
        "--multikueue-config",
        type=_multikueue,
        default=None,
        help="Kueue's multiKueue configuration as JSON, e.g. "
        '\'{"workerLostTimeout": "30s", "dispatcherName": '
        "\"kueue.x-k8s.io/multikueue-dispatcher-incremental\"}' (default: Kueue's)",
    )
    p.add_argument("--kai", action="store_true", help="emulate KAI GPU sharing")
    p.add_argument(
        "--snapshot",
        default=None,
        help="JSON state file: loaded at start, saved periodically and on exit",
    )
    p.add_argument(
        "--snapshot-interval",
        type=float,
        default=10.0,
        help="seconds between periodic snapshot saves",
    )
    p.add_argument(
        "--event-ttl",
        type=_positive_seconds,
        default=DEFAULT_EVENT_TTL,
        help="seconds an event is kept after its last write, like kube-apiserver's "
        "--event-ttl (default: 3600, one hour)",
    )
    p.add_argument(
        "--rayjob-run-seconds",
        type=float,
        default=None,
        help="simulated Ray drivers run this long (default: the fleet's rayjobs.runSeconds, "
        "else 5); a RayJob's kubesim.io/job-run-seconds annotation overrides it",
    )
    p.add_argument(
        "--rayjob-outcome",
        choices=("succeeded", "failed"),
        default=None,
        help="how simulated Ray drivers end (default: the fleet's rayjobs.outcome, else "
        "succeeded); a RayJob's kubesim.io/job-outcome annotation overrides it",
    )
    # The cluster autoscaler's timings; unset: the fleet's ``autoscaler`` keys or defaults.
    p.add_argument(
        "--scale-up-delay",
        type=float,
        default=None,
        help="seconds until a node the autoscaler adds is Ready (default: 30)",
    )
    p.add_argument(
        "--scale-down-unneeded-time",
        type=float,
        default=None,
        help="seconds an added node stays empty before it is removed, like "
        "cluster-autoscaler's --scale-down-unneeded-time (default: 600)",
    )
    p.add_argument(
        "--provisioning-request-booking-time",
        type=float,
        default=None,
        help="seconds a provisioned ProvisioningRequest's capacity stays booked (default: 600)",
    )
    p.add_argument(
        "--watch-history",
        type=int,
        default=DEFAULT_WATCH_HISTORY,
        help="changes kept for watches; a watch from an older resourceVersion is answered "
        f"410 Expired (default: {DEFAULT_WATCH_HISTORY})",
    )
    p.add_argument(
        "--watch-bookmark-interval",
        type=_positive_seconds,
        default=DEFAULT_BOOKMARK_INTERVAL,
        help="seconds between BOOKMARK events on watches that allow them (default: 60, "
        "the API server's)",
    )
    p.add_argument(
        "--real-ray",
        type=int,
        default=None,
        help="run real Ray (heads, workers, RayJob drivers) for the first N RayClusters "
        "(default: the fleet's realRay, else 0: every cluster simulated)",
    )
    p.add_argument(
        "--procs-root",
        default="kubesim-procs",
        help="folder the real processes behind pods run in (real Ray, JupyterLab, sshd; "
        "kubesim/README.md), emptied at start (default: ./kubesim-procs)",
    )
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run until SIGTERM/SIGINT."""
    args = parse_args(argv)
    sim = KubeSim(
        fleet=args.config,
        port=args.port,
        startup_delay=args.startup_delay,
        kueue=args.kueue,
        kai=args.kai,
        snapshot_path=args.snapshot,
        host=args.host,
        snapshot_interval=args.snapshot_interval,
        event_ttl=args.event_ttl,
        scale_up_delay=args.scale_up_delay,
        scale_down_unneeded_time=args.scale_down_unneeded_time,
        booking_time=args.provisioning_request_booking_time,
        watch_history=args.watch_history,
        watch_bookmark_interval=args.watch_bookmark_interval,
        kueue_feature_gates=args.kueue_feature_gates,
        kueue_config=args.kueue_config,
        multikueue=args.multikueue_config,
        procs_root=args.procs_root,
        real_ray=args.real_ray,
    )
    sim.set_rayjob_defaults(run_seconds=args.rayjob_run_seconds, outcome=args.rayjob_outcome)
    if sim.cluster.realray is not None:
        clear_root(Path(args.procs_root))
    sim.start()
    # What start-up built (API schemas, CRDs, compiled rules, the fleet) lives as long as
    # the process: kept out of the collector's full passes, which would walk it again at
    # every pass and make a write's cost grow with the size of the schemas.
    gc.freeze()
    if args.kubeconfig_out:
        sim.write_kubeconfig(args.kubeconfig_out)
    nodes = sim.cluster.store.count("nodes")
    print(
        f"kubesim listening on {sim.url} ({nodes} nodes from {args.config}"
        + (f", kubeconfig {args.kubeconfig_out}" if args.kubeconfig_out else "")
        + (f", real Ray for {real.heads} clusters" if (real := sim.cluster.realray) else "")
        + ")",
        flush=True,
    )
    done = threading.Event()

    def _stop(signum: int, frame: FrameType | None) -> None:
        done.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    while not done.wait(0.5):
        pass
    sim.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
