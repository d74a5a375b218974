"""The clusters app's schema as of migration 0022, squashed (docs/operations.md,
"Upgrading"): a fresh database builds it in one step; a database already at 0022 finds
it applied. The two operations kept beside the models are ones a fresh install needs:
the admission and reconcile passes' rows, and PostgreSQL's trigger that makes an event's
insert touch its cluster's row (the list cache's fingerprint reads row versions).
"""

import django.core.validators
import django.db.models.deletion
from decimal import Decimal
from django.conf import settings
from django.db import migrations, models


def _create_pass_rows(apps, schema_editor):
    """One row per pass, never requested yet (nudges claim them)."""
    pending = apps.get_model("clusters", "PendingPass")
    pending.objects.bulk_create(
        [pending(name="admission"), pending(name="reconcile")], ignore_conflicts=True
    )


TOUCH_FUNCTION = "gangway_event_touches_cluster"
TOUCH_TRIGGER = "clusters_clusterevent_touches_cluster"

# One UPDATE per insert statement (a statement trigger with a transition table), so a bulk
# insert of a thousand events touches its thousand rows at once.
CREATE_TOUCH = f"""
CREATE OR REPLACE FUNCTION {TOUCH_FUNCTION}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE clusters_clusterrequest SET id = id
    WHERE id IN (SELECT DISTINCT cluster_id FROM inserted_events);
    RETURN NULL;
END
$$;
CREATE TRIGGER {TOUCH_TRIGGER}
    AFTER INSERT ON clusters_clusterevent
    REFERENCING NEW TABLE AS inserted_events
    FOR EACH STATEMENT EXECUTE FUNCTION {TOUCH_FUNCTION}();
"""

DROP_TOUCH = f"""
DROP TRIGGER IF EXISTS {TOUCH_TRIGGER} ON clusters_clusterevent;
DROP FUNCTION IF EXISTS {TOUCH_FUNCTION}();
"""


def _on_postgresql(sql):
    """SQLite (``make run``) has no list cache and gets no trigger."""

    def run(apps, schema_editor):
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.execute(sql)

    return run


class Migration(migrations.Migration):

    replaces = [('clusters', '0001_initial'), ('clusters', '0002_earmark_and_charge_autoscaling_at_max'), ('clusters', '0003_pending_pass'), ('clusters', '0004_jobs'), ('clusters', '0005_flavor_fungibility'), ('clusters', '0006_capacity_requests'), ('clusters', '0007_image_env'), ('clusters', '0008_idle_reclaim'), ('clusters', '0009_queue_hold'), ('clusters', '0010_an_event_touches_its_cluster'), ('clusters', '0011_pass_started_at'), ('clusters', '0012_lean_indexes'), ('clusters', '0013_provision_requested'), ('clusters', '0014_job_log_tail_unread'), ('clusters', '0015_cluster_notebook'), ('clusters', '0016_clusterrequest_ssh_tunnel'), ('clusters', '0017_service'), ('clusters', '0018_service_endpoint'), ('clusters', '0019_surge_and_surge_usage_spans'), ('clusters', '0020_service_scale_to_zero'), ('clusters', '0021_growth_and_worker_cap'), ('clusters', '0022_service_traffic')]

    initial = True

    dependencies = [
        ('tenants', '0001_squashed_0015'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='ClusterRequest',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.CharField(max_length=53)),
                ('kind', models.CharField(choices=[('dev', 'Development'), ('prod', 'Production')], default='dev', max_length=8)),
                ('workers', models.PositiveIntegerField(default=1, validators=[django.core.validators.MinValueValidator(0), django.core.validators.MaxValueValidator(1024)])),
                ('min_workers', models.PositiveIntegerField(blank=True, null=True)),
                ('max_workers', models.PositiveIntegerField(blank=True, null=True)),
                ('gpu_fraction', models.DecimalField(blank=True, decimal_places=3, max_digits=4, null=True, validators=[django.core.validators.MinValueValidator(Decimal('0.001')), django.core.validators.MaxValueValidator(Decimal('0.999'))])),
                ('priority', models.IntegerField(default=0)),
                ('ttl_hours', models.PositiveIntegerField(blank=True, null=True)),
                ('image', models.CharField(blank=True, max_length=255)),
                ('gpus', models.DecimalField(decimal_places=3, default=Decimal('0'), max_digits=10)),
                ('cpu', models.DecimalField(decimal_places=3, default=Decimal('0'), max_digits=12)),
                ('memory_gib', models.DecimalField(decimal_places=3, default=Decimal('0'), max_digits=12)),
                ('state', models.CharField(choices=[('queued', 'Queued'), ('admitted', 'Admitted'), ('provisioning', 'Provisioning'), ('ready', 'Ready'), ('suspended', 'Suspended'), ('deleting', 'Deleting'), ('deleted', 'Deleted'), ('failed', 'Failed')], default='queued', max_length=16)),
                ('holds_gpus', models.BooleanField(db_index=True, default=False, help_text='Whether the request currently holds its GPUs against the quota: set on admission, cleared on suspension, failure or once a deletion finished.')),
                ('state_reason', models.CharField(blank=True, max_length=500)),
                ('last_error', models.TextField(blank=True)),
                ('attempts', models.PositiveIntegerField(default=0)),
                ('deletion_reason', models.CharField(blank=True, max_length=32)),
                ('queue_position', models.PositiveIntegerField(blank=True, null=True)),
                ('queue_flavor_position', models.PositiveIntegerField(blank=True, null=True)),
                ('queue_reason', models.CharField(blank=True, max_length=32)),
                ('queue_message', models.CharField(blank=True, max_length=500)),
                ('queue_eta', models.DateTimeField(blank=True, null=True)),
                ('reclaim_after', models.DateTimeField(blank=True, help_text='Set when another tenant needs this borrowed capacity back: the cluster is suspended (never deleted) at this time unless the need goes away.', null=True)),
                ('created_at', models.DateTimeField(auto_now_add=True, db_index=True)),
                ('updated_at', models.DateTimeField(auto_now=True)),
                ('progress_at', models.DateTimeField(auto_now_add=True)),
                ('admitted_at', models.DateTimeField(blank=True, null=True)),
                ('ready_at', models.DateTimeField(blank=True, null=True)),
                ('suspended_at', models.DateTimeField(blank=True, null=True)),
                ('expires_at', models.DateTimeField(blank=True, null=True)),
                ('expiry_warned_at', models.DateTimeField(blank=True, help_text='When the owner was warned of the coming expiry.', null=True)),
                ('deleted_at', models.DateTimeField(blank=True, null=True)),
                ('flavor', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='clusters', to='tenants.gpuflavor')),
                ('owner', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='clusters', to=settings.AUTH_USER_MODEL)),
                ('tenant', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='clusters', to='tenants.tenant')),
            ],
            options={
                'ordering': ['-created_at', '-id'],
            },
        ),
        migrations.CreateModel(
            name='ClusterEvent',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('at', models.DateTimeField(auto_now_add=True)),
                ('actor_name', models.CharField(default='system', max_length=150)),
                ('from_state', models.CharField(blank=True, max_length=16)),
                ('to_state', models.CharField(max_length=16)),
                ('reason', models.CharField(max_length=64)),
                ('message', models.CharField(blank=True, max_length=500)),
                ('actor', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('cluster', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='events', to='clusters.clusterrequest')),
            ],
            options={
                'ordering': ['at', 'id'],
            },
        ),
        migrations.CreateModel(
            name='UsageSpan',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('username', models.CharField(max_length=150)),
                ('flavor_name', models.CharField(max_length=40)),
                ('kind', models.CharField(choices=[('dev', 'Development'), ('prod', 'Production')], max_length=8)),
                ('gpus', models.DecimalField(decimal_places=3, max_digits=10)),
                ('started_at', models.DateTimeField(db_index=True)),
                ('ended_at', models.DateTimeField(blank=True, db_index=True, null=True)),
                ('cluster', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='usage_spans', to='clusters.clusterrequest')),
                ('tenant', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='usage_spans', to='tenants.tenant')),
            ],
            options={
                'ordering': ['started_at', 'id'],
            },
        ),
        migrations.AddIndex(
            model_name='clusterrequest',
            index=models.Index(fields=['state', 'progress_at'], name='clusters_cl_state_6c1353_idx'),
        ),
        migrations.AddConstraint(
            model_name='clusterrequest',
            constraint=models.UniqueConstraint(condition=models.Q(('state', 'deleted'), _negated=True), fields=('tenant', 'name'), name='cluster_name_unique_while_not_deleted'),
        ),
        migrations.AddConstraint(
            model_name='usagespan',
            constraint=models.UniqueConstraint(condition=models.Q(('ended_at__isnull', True)), fields=('cluster',), name='one_open_span'),
        ),
        migrations.AddField(
            model_name='clusterrequest',
            name='earmarked_at',
            field=models.DateTimeField(blank=True, help_text='Set while borrowed quota is being (or was) reclaimed for this queued request: what the reclaim frees is promised to it until it is admitted.', null=True),
        ),
        migrations.AddField(
            model_name='clusterrequest',
            name='gpus_released_at',
            field=models.DateTimeField(blank=True, help_text='When the request last gave its GPUs back (its pods were gone).', null=True),
        ),
        migrations.AddField(
            model_name='clusterrequest',
            name='workload',
            field=models.CharField(choices=[('cluster', 'Cluster'), ('job', 'Job')], default='cluster', max_length=8),
        ),
        migrations.AlterField(
            model_name='clusterrequest',
            name='state',
            field=models.CharField(choices=[('queued', 'Queued'), ('admitted', 'Admitted'), ('provisioning', 'Provisioning'), ('ready', 'Ready'), ('suspended', 'Suspended'), ('deleting', 'Deleting'), ('deleted', 'Deleted'), ('failed', 'Failed'), ('starting', 'Starting'), ('running', 'Running'), ('succeeded', 'Succeeded'), ('stopped', 'Stopped')], default='queued', max_length=16),
        ),
        migrations.CreateModel(
            name='Job',
            fields=[
                ('request', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name='job', serialize=False, to='clusters.clusterrequest')),
                ('entrypoint', models.TextField()),
                ('runtime_env', models.JSONField(blank=True, default=dict)),
                ('active_deadline_seconds', models.PositiveIntegerField(blank=True, null=True)),
                ('ttl_seconds_after_finished', models.PositiveIntegerField(default=0)),
                ('ray_job_id', models.CharField(blank=True, max_length=128)),
                ('ray_cluster_name', models.CharField(blank=True, max_length=128)),
                ('job_status', models.CharField(blank=True, help_text="Ray's status of the job (PENDING, RUNNING, ...).", max_length=16)),
                ('message', models.TextField(blank=True)),
                ('started_at', models.DateTimeField(blank=True, null=True)),
                ('ended_at', models.DateTimeField(blank=True, null=True)),
                ('log_tail', models.TextField(blank=True)),
                ('host', models.ForeignKey(blank=True, help_text='The dev cluster the job runs on, when it runs on an existing one.', null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='hosted_jobs', to='clusters.clusterrequest')),
            ],
        ),
        migrations.AddField(
            model_name='clusterrequest',
            name='accepted_flavors',
            field=models.JSONField(blank=True, default=list, help_text='The GPU flavors the request accepts, by name, in order of preference (empty: only flavor). flavor is the first of them while it waits and the one it was admitted on once admitted.'),
        ),
        migrations.AddField(
            model_name='clusterrequest',
            name='queue_flavors',
            field=models.JSONField(blank=True, default=list, help_text='While a request that accepts several flavors waits: its standing on each, [{flavor, position, reason, message, eta}] in its order of preference.'),
        ),
        migrations.AddField(
            model_name='clusterrequest',
            name='capacity_attempts',
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AddField(
            model_name='clusterrequest',
            name='capacity_message',
            field=models.CharField(blank=True, max_length=500),
        ),
        migrations.AddField(
            model_name='clusterrequest',
            name='capacity_request',
            field=models.CharField(blank=True, max_length=253),
        ),
        migrations.AddField(
            model_name='clusterrequest',
            name='capacity_requested_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='clusterrequest',
            name='capacity_state',
            field=models.CharField(blank=True, choices=[('requested', 'Requested'), ('provisioned', 'Provisioned'), ('failed', 'Failed')], max_length=16),
        ),
        migrations.AddField(
            model_name='clusterrequest',
            name='container_gpus',
            field=models.BooleanField(default=False, help_text="Ray runtime environments that run containers see exactly the pod's GPUs: each GPU worker writes a CDI spec of its own GPUs (docs/containers.md)."),
        ),
        migrations.AddField(
            model_name='clusterrequest',
            name='env',
            field=models.JSONField(blank=True, default=dict, help_text='Environment variables set on its Ray containers, {name: value}, checked by clusters.environment.validate_env.'),
        ),
        migrations.AlterField(
            model_name='clusterrequest',
            name='image',
            field=models.CharField(blank=True, help_text='The Ray image of its head and workers, from RAY_IMAGE_ALLOWLIST (empty on older rows: the default image).', max_length=255),
        ),
        migrations.AddField(
            model_name='clusterrequest',
            name='activity_checked_at',
            field=models.DateTimeField(blank=True, help_text="When the cluster's activity was last read from Ray.", null=True),
        ),
        migrations.AddField(
            model_name='clusterrequest',
            name='activity_note',
            field=models.CharField(blank=True, help_text='What the last activity read found, in words.', max_length=300),
        ),
        migrations.AddField(
            model_name='clusterrequest',
            name='idle_warned_at',
            field=models.DateTimeField(blank=True, help_text='When the owner was warned the idle cluster is suspended.', null=True),
        ),
        migrations.AddField(
            model_name='clusterrequest',
            name='last_active_at',
            field=models.DateTimeField(blank=True, help_text='When the cluster was last seen in use.', null=True),
        ),
        migrations.CreateModel(
            name='IdleSpan',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('username', models.CharField(max_length=150)),
                ('flavor_name', models.CharField(max_length=40)),
                ('gpus', models.DecimalField(decimal_places=3, max_digits=10)),
                ('started_at', models.DateTimeField(db_index=True)),
                ('ended_at', models.DateTimeField(blank=True, db_index=True, null=True)),
                ('cluster', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='idle_spans', to='clusters.clusterrequest')),
                ('tenant', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='idle_spans', to='tenants.tenant')),
            ],
            options={
                'ordering': ['started_at', 'id'],
                'constraints': [models.UniqueConstraint(condition=models.Q(('ended_at__isnull', True)), fields=('cluster',), name='one_open_idle_span')],
            },
        ),
        migrations.AddField(
            model_name='clusterrequest',
            name='held_at',
            field=models.DateTimeField(blank=True, help_text='When an admin put the queued request on hold: the queue passes over it until it is released (the reason is in its timeline and hold_reason).', null=True),
        ),
        migrations.AddField(
            model_name='clusterrequest',
            name='hold_reason',
            field=models.CharField(blank=True, max_length=500),
        ),
        migrations.CreateModel(
            name='PendingPass',
            fields=[
                ('name', models.CharField(max_length=32, primary_key=True, serialize=False)),
                ('requested_at', models.DateTimeField(blank=True, null=True)),
                ('started_at', models.DateTimeField(blank=True, null=True)),
            ],
        ),
        migrations.AddIndex(
            model_name='clusterrequest',
            index=models.Index(fields=['workload'], name='clusterrequest_workload'),
        ),
        migrations.AddField(
            model_name='clusterrequest',
            name='provision_requested_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddIndex(
            model_name='clusterrequest',
            index=models.Index(condition=models.Q(('provision_requested_at__isnull', False)), fields=['provision_requested_at'], name='clusterrequest_provision_asked'),
        ),
        migrations.AlterField(
            model_name='job',
            name='log_tail',
            field=models.TextField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='clusterrequest',
            name='notebook',
            field=models.BooleanField(default=False, help_text="The head runs JupyterLab, reached through the product's proxy by the owner and the tenant's admins (docs/notebooks.md)."),
        ),
        migrations.AddField(
            model_name='clusterrequest',
            name='ssh',
            field=models.BooleanField(default=False, help_text="The head runs an SSH server on its port named ssh, accepting the keys of the owner and the tenant's admins (docs/tunnels.md)."),
        ),
        migrations.CreateModel(
            name='Tunnel',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('username', models.CharField(max_length=150)),
                ('port', models.PositiveIntegerField()),
                ('purpose', models.CharField(default='port-forward', max_length=16)),
                ('opened_at', models.DateTimeField(auto_now_add=True)),
                ('seen_at', models.DateTimeField(auto_now_add=True)),
                ('closed_at', models.DateTimeField(blank=True, null=True)),
                ('bytes_in', models.BigIntegerField(default=0)),
                ('bytes_out', models.BigIntegerField(default=0)),
                ('close_reason', models.CharField(blank=True, max_length=300)),
                ('cluster', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='tunnels', to='clusters.clusterrequest')),
                ('user', models.ForeignKey(null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'indexes': [models.Index(fields=['cluster', 'closed_at'], name='tunnel_cluster_open')],
            },
        ),
        migrations.AlterField(
            model_name='clusterrequest',
            name='workload',
            field=models.CharField(choices=[('cluster', 'Cluster'), ('job', 'Job'), ('service', 'Service')], default='cluster', max_length=8),
        ),
        migrations.CreateModel(
            name='Service',
            fields=[
                ('request', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name='service', serialize=False, to='clusters.clusterrequest')),
                ('serve_config', models.TextField(help_text="Ray Serve's config (serveConfigV2), as YAML.")),
                ('upgrade_type', models.CharField(default='NewCluster', max_length=40)),
                ('upgrade_options', models.JSONField(blank=True, default=dict)),
                ('applications', models.JSONField(blank=True, default=dict)),
                ('active_cluster', models.CharField(blank=True, max_length=128)),
                ('pending_cluster', models.CharField(blank=True, max_length=128)),
                ('upgrading', models.BooleanField(default=False)),
                ('serve_endpoints', models.PositiveIntegerField(default=0)),
                ('public', models.BooleanField(default=False, help_text='Whether its endpoint answers callers without a token.')),
                ('requests_total', models.PositiveBigIntegerField(default=0, help_text='Requests relayed through its endpoint (flushed from Redis).')),
            ],
        ),
        migrations.CreateModel(
            name='ServiceToken',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.CharField(max_length=64)),
                ('prefix', models.CharField(max_length=16)),
                ('digest', models.CharField(max_length=64, unique=True)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('last_used_at', models.DateTimeField(blank=True, null=True)),
                ('created_by', models.ForeignKey(null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('service', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='tokens', to='clusters.service')),
            ],
            options={
                'ordering': ['created_at', 'id'],
            },
        ),
        migrations.CreateModel(
            name='Surge',
            fields=[
                ('request', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name='surge', serialize=False, to='clusters.clusterrequest')),
                ('gpus', models.DecimalField(decimal_places=3, max_digits=10)),
                ('cpu', models.DecimalField(decimal_places=3, default=Decimal('0'), max_digits=12)),
                ('memory_gib', models.DecimalField(decimal_places=3, default=Decimal('0'), max_digits=12)),
                ('purpose', models.CharField(default='surge', help_text='What it is for, as messages say it.', max_length=40)),
                ('change', models.JSONField(blank=True, default=dict)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('admitted_at', models.DateTimeField(blank=True, null=True)),
                ('applied_at', models.DateTimeField(blank=True, null=True)),
                ('queue_position', models.PositiveIntegerField(blank=True, null=True)),
                ('queue_reason', models.CharField(blank=True, max_length=32)),
                ('queue_message', models.CharField(blank=True, max_length=500)),
                ('queue_eta', models.DateTimeField(blank=True, null=True)),
            ],
        ),
        migrations.RemoveConstraint(
            model_name='usagespan',
            name='one_open_span',
        ),
        migrations.AddField(
            model_name='usagespan',
            name='surge',
            field=models.BooleanField(default=False, help_text="Held by the request's surge (Surge), beside its own GPUs."),
        ),
        migrations.AddConstraint(
            model_name='usagespan',
            constraint=models.UniqueConstraint(condition=models.Q(('ended_at__isnull', True)), fields=('cluster', 'surge'), name='one_open_span_each'),
        ),
        migrations.AddField(
            model_name='surge',
            name='flavor',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to='tenants.gpuflavor'),
        ),
        migrations.AddField(
            model_name='service',
            name='last_request_at',
            field=models.DateTimeField(blank=True, help_text='The last request relayed (flushed from Redis).', null=True),
        ),
        migrations.AddField(
            model_name='service',
            name='scale_to_zero',
            field=models.BooleanField(default=False, help_text='Whether it gives its GPUs back after a window without endpoint requests.'),
        ),
        migrations.AddField(
            model_name='service',
            name='scale_to_zero_after_minutes',
            field=models.PositiveIntegerField(default=30, help_text='The window without requests after which it scales to zero.'),
        ),
        migrations.AddField(
            model_name='service',
            name='woken_at',
            field=models.DateTimeField(blank=True, help_text='When a request woke it from zero (until it serves).', null=True),
        ),
        migrations.AddField(
            model_name='service',
            name='capped_cluster',
            field=models.CharField(blank=True, max_length=128),
        ),
        migrations.AddField(
            model_name='service',
            name='worker_cap',
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        migrations.CreateModel(
            name='Growth',
            fields=[
                ('request', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name='growth', serialize=False, to='clusters.clusterrequest')),
                ('workers', models.PositiveIntegerField()),
                ('gpus', models.DecimalField(decimal_places=3, max_digits=10)),
                ('cpu', models.DecimalField(decimal_places=3, default=Decimal('0'), max_digits=12)),
                ('memory_gib', models.DecimalField(decimal_places=3, default=Decimal('0'), max_digits=12)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('admitted_at', models.DateTimeField(blank=True, null=True)),
                ('queue_position', models.PositiveIntegerField(blank=True, null=True)),
                ('queue_reason', models.CharField(blank=True, max_length=32)),
                ('queue_message', models.CharField(blank=True, max_length=500)),
                ('queue_eta', models.DateTimeField(blank=True, null=True)),
                ('flavor', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to='tenants.gpuflavor')),
            ],
        ),
        migrations.AddField(
            model_name='service',
            name='traffic',
            field=models.JSONField(blank=True, default=dict),
        ),
        migrations.RunPython(_create_pass_rows, migrations.RunPython.noop),
        migrations.RunPython(_on_postgresql(CREATE_TOUCH), _on_postgresql(DROP_TOUCH)),
    ]
