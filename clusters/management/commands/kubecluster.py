"""``manage.py kubecluster``: the fleet's Kubernetes clusters from a shell.

    python manage.py kubecluster --as root add onprem --server https://k8s:6443 \\
        --token-file token.txt --ca-file ca.crt --region eu-west --order 10
    python manage.py kubecluster list
    python manage.py kubecluster --as root {check,cordon,uncordon,remove} onprem
    python manage.py kubecluster --as root drain onprem [--mode requeue]
    python manage.py kubecluster --as root rotate-keys
    python manage.py kubecluster rbac          # the ClusterRole a member must grant
    python manage.py kubecluster kueue-config  # what Kueue's Configuration must carry

Writes go through the services the API calls, as the platform admin named by ``--as``
(audited under that name). See docs/fleet.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from clusters.kube import queues
from clusters.members import access, selectors, services
from clusters.models import DrainMode, KubeCluster, Schedulable
from clusters.queue import usage_reads
from controlplane.exceptions import ServiceConflict
from tenants.models import GpuFlavor, Tenant


def _read(path: str | None) -> str:
    if not path:
        return ""
    try:
        return Path(path).read_text().strip()
    except OSError as exc:
        raise CommandError(f"Cannot read {path}: {exc.strerror}") from exc


class Command(BaseCommand):
    help = (
        "Register, list, check, cordon, uncordon, drain and remove the fleet's Kubernetes clusters."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--as", dest="actor", help="the platform admin who acts (username)")
        sub = parser.add_subparsers(dest="verb", required=True)
        add = sub.add_parser("add", help="register a cluster (its credentials are checked)")
        add.add_argument("name")
        add.add_argument("--server", required=True, help="the API server's URL")
        add.add_argument("--token-file", help="a file holding a service account token")
        add.add_argument("--client-certificate-file", help="a client certificate (PEM)")
        add.add_argument("--client-key-file", help="its key (PEM)")
        add.add_argument("--ca-file", help="the API server's CA bundle (PEM)")
        add.add_argument("--insecure-skip-tls-verify", action="store_true")
        add.add_argument("--region", default="")
        add.add_argument("--label", action="append", default=[], help="key=value, repeatable")
        add.add_argument("--order", type=int, default=100, help="placement order, lowest first")
        add.add_argument("--tenant", action="append", default=[], help="allow only these")
        sub.add_parser("list", help="every member with its health")
        for verb in ("check", "cordon", "uncordon", "remove"):
            sub.add_parser(verb).add_argument("name")
        drain = sub.add_parser("drain", help="move or wait for what runs there; tell owners")
        drain.add_argument("name")
        drain.add_argument(
            "--mode",
            default=DrainMode.DEFAULT,
            help="default: each kind its own way (jobs run to their end); requeue: jobs too",
        )
        sub.add_parser("rotate-keys", help="seal every secret again with the first key")
        sub.add_parser("rbac", help="print the ClusterRole a member must grant gangway")
        sub.add_parser(
            "kueue-config",
            help="print the part of Kueue's Configuration gangway's ClusterQueues need "
            "(the DRA flavors' deviceClassMappings; admissionFairSharing when "
            "FAIR_SHARE_HALF_LIFE_HOURS is set)",
        )

    def handle(self, *args: Any, verb: str, **options: Any) -> None:
        if verb == "list":
            return self._list()
        if verb == "rbac":
            self.stdout.write(
                access.cluster_role(
                    queue_mode=settings.QUEUE_MODE, kai_enabled=settings.KAI_ENABLED
                ),
                ending="",
            )
            return None
        if verb == "kueue-config":
            flavors = list(GpuFlavor.objects.all())
            stanza = queues.device_class_mappings(flavors)
            half_life = usage_reads.half_life()
            if half_life is not None:
                stanza.update(queues.admission_fair_sharing(flavors, half_life))
            self.stdout.write(yaml.safe_dump(stanza, sort_keys=False), ending="")
            return None
        actor = self._actor(options["actor"])
        try:
            self._write(verb, actor, options)
        except ValidationError as exc:
            raise CommandError(" ".join(exc.messages)) from exc
        except (ServiceConflict, PermissionDenied) as exc:
            raise CommandError(str(exc)) from exc
        return None

    def _actor(self, username: str | None) -> Any:
        if not username:
            raise CommandError("Name the platform admin who acts: --as USERNAME.")
        user = get_user_model().objects.filter(username=username, is_active=True).first()
        if user is None:
            raise CommandError(f"There is no active user {username!r}.")
        return user

    def _member(self, name: str) -> KubeCluster:
        member = KubeCluster.objects.filter(name=name).first()
        if member is None:
            raise CommandError(f"There is no Kubernetes cluster named {name!r}.")
        return member

    def _write(self, verb: str, actor: Any, options: dict[str, Any]) -> None:
        if verb == "add":
            member = services.kube_cluster_register(actor=actor, **self._registration(options))
            self.stdout.write(
                f"Registered {member.name}: Kubernetes {member.kubernetes_version}, "
                f"{member.api_latency_ms} ms."
            )
        elif verb == "rotate-keys":
            count = services.kube_cluster_rotate_keys(actor=actor)
            self.stdout.write(f"Sealed the credentials of {count} cluster(s) with the first key.")
        elif verb == "check":
            report = services.kube_cluster_check(actor=actor, member=self._member(options["name"]))
            if not report.passed:
                raise CommandError(report.message)
            self.stdout.write(f"{options['name']} passes the check.")
        elif verb == "drain":
            member = services.kube_cluster_drain(
                actor=actor, member=self._member(options["name"]), mode=options["mode"]
            )
            progress = selectors.drain_progress([member])[member.pk]
            self.stdout.write(
                f"{member.name} is draining ({member.drain_mode}): {progress.requeue} to be "
                f"requeued, {progress.wait} running to their end, {progress.deleting} being "
                "deleted; the engine moves them."
            )
        elif verb == "remove":
            services.kube_cluster_remove(actor=actor, member=self._member(options["name"]))
            self.stdout.write(f"Removed {options['name']}.")
        else:
            state = Schedulable.CORDONED if verb == "cordon" else Schedulable.ACTIVE
            member = services.kube_cluster_set_schedulable(
                actor=actor, member=self._member(options["name"]), schedulable=state
            )
            self.stdout.write(f"{member.name} is {member.get_schedulable_display().lower()}.")

    def _registration(self, options: dict[str, Any]) -> dict[str, Any]:
        labels = {}
        for item in options["label"]:
            key, sep, value = item.partition("=")
            if not sep:
                raise CommandError(f"--label {item!r}: write key=value.")
            labels[key] = value
        tenants = list(Tenant.objects.unscoped().filter(slug__in=options["tenant"]))
        unknown = sorted(set(options["tenant"]) - {t.slug for t in tenants})
        if unknown:
            raise CommandError(f"No tenant {', '.join(unknown)}.")
        return {
            "name": options["name"],
            "server": options["server"],
            "token": _read(options["token_file"]),
            "client_certificate": _read(options["client_certificate_file"]),
            "client_key": _read(options["client_key_file"]),
            "ca_data": _read(options["ca_file"]),
            "insecure_skip_tls_verify": options["insecure_skip_tls_verify"],
            "region": options["region"],
            "labels": labels,
            "placement_order": options["order"],
            "allowed_tenants": tenants,
        }

    def _list(self) -> None:
        rows = [("NAME", "ORDER", "REGION", "SCHEDULABLE", "REACHABLE", "LATENCY", "VERSION")]
        for m in selectors.kube_cluster_list():
            reachable = {True: "yes", False: "no", None: "?"}[m.reachable]
            latency = f"{m.api_latency_ms:.0f} ms" if m.api_latency_ms is not None else "-"
            rows.append(
                (
                    m.name,
                    str(m.placement_order),
                    m.region or "-",
                    m.schedulable,
                    reachable,
                    latency,
                    m.kubernetes_version or "-",
                )
            )
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        for row in rows:
            self.stdout.write(
                "  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip()
            )
