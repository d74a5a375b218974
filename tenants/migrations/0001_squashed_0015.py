"""The tenants app's schema as of migration 0015, squashed (docs/operations.md,
"Upgrading"): a fresh database builds it in one step; one at 0015 finds it applied."""

import django.core.validators
import django.db.models.deletion
import tenants.slugs
from decimal import Decimal
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    replaces = [('tenants', '0001_initial'), ('tenants', '0002_gpuflavor_observed_capacity'), ('tenants', '0003_tenant_namespace_derived_not_kubernetes'), ('tenants', '0004_flavor_max_node_count'), ('tenants', '0005_tenant_pod_security'), ('tenants', '0006_idle_reclaim'), ('tenants', '0007_admin_pages'), ('tenants', '0008_sso'), ('tenants', '0009_cohort_tree'), ('tenants', '0010_lean_indexes'), ('tenants', '0011_password_state'), ('tenants', '0012_observed_nodes'), ('tenants', '0013_tenant_slug_rule'), ('tenants', '0014_tenant_allow_pip_direct_urls'), ('tenants', '0015_sshkey')]

    initial = True

    dependencies = [
        ('auth', '0012_alter_user_first_name_max_length'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='GpuFlavor',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.CharField(max_length=40, unique=True, validators=[django.core.validators.RegexValidator('^[a-z]([-a-z0-9]{0,38}[a-z0-9])?$', 'Use 1-40 lowercase letters, digits and hyphens, starting with a letter and ending with a letter or digit.', code='invalid_slug')])),
                ('gpu_product', models.CharField(max_length=63, validators=[django.core.validators.RegexValidator('^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$', "A node label value: at most 63 letters, digits, '-', '_' or '.'.", code='invalid_label_value')])),
                ('gpus_per_node', models.PositiveIntegerField(validators=[django.core.validators.MinValueValidator(1), django.core.validators.MaxValueValidator(64)])),
                ('cpu_per_node', models.PositiveIntegerField(validators=[django.core.validators.MinValueValidator(1), django.core.validators.MaxValueValidator(4096)])),
                ('memory_per_node_gib', models.PositiveIntegerField(validators=[django.core.validators.MinValueValidator(1), django.core.validators.MaxValueValidator(65536)])),
                ('node_count', models.PositiveIntegerField(default=0, validators=[django.core.validators.MaxValueValidator(100000)])),
                ('sharing', models.BooleanField(default=False)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('observed_at', models.DateTimeField(blank=True, editable=False, null=True)),
                ('observed_free_gpus', models.PositiveIntegerField(blank=True, editable=False, null=True)),
                ('observed_free_nodes', models.PositiveIntegerField(blank=True, editable=False, null=True)),
            ],
            options={
                'ordering': ['name'],
            },
        ),
        migrations.CreateModel(
            name='Tenant',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('slug', models.CharField(max_length=40, unique=True, validators=[django.core.validators.RegexValidator('^[a-z]([-a-z0-9]{0,38}[a-z0-9])?$', 'Use 1-40 lowercase letters, digits and hyphens, starting with a letter and ending with a letter or digit.', code='invalid_slug')])),
                ('name', models.CharField(max_length=100)),
                ('namespace', models.CharField(max_length=63, unique=True, validators=[django.core.validators.RegexValidator('^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$', 'A namespace is a DNS label: at most 63 lowercase letters, digits and hyphens.', code='invalid_namespace')])),
                ('cohort', models.CharField(default='default', help_text="Tenants in one cohort may borrow each other's unused quota.", max_length=40, validators=[django.core.validators.RegexValidator('^[a-z]([-a-z0-9]{0,38}[a-z0-9])?$', 'Use 1-40 lowercase letters, digits and hyphens, starting with a letter and ending with a letter or digit.', code='invalid_slug')])),
                ('weight', models.DecimalField(decimal_places=2, default=Decimal('1.00'), help_text='Fair-share weight: a tenant with weight 2 is entitled to twice the share.', max_digits=6, validators=[django.core.validators.MinValueValidator(Decimal('0.01')), django.core.validators.MaxValueValidator(Decimal('1000'))])),
                ('max_dev_clusters_per_user', models.PositiveIntegerField(default=2, validators=[django.core.validators.MaxValueValidator(100)])),
                ('max_dev_gpus_per_user', models.PositiveIntegerField(default=2, validators=[django.core.validators.MaxValueValidator(1024)])),
                ('dev_ttl_hours', models.PositiveIntegerField(default=8, validators=[django.core.validators.MinValueValidator(1), django.core.validators.MaxValueValidator(2160)])),
                ('max_ttl_hours', models.PositiveIntegerField(default=72, validators=[django.core.validators.MinValueValidator(1), django.core.validators.MaxValueValidator(8760)])),
                ('cpu_quota', models.PositiveIntegerField(default=0, help_text='CPU cores the tenant may request in total (0: no CPU quota).', validators=[django.core.validators.MaxValueValidator(10000000)])),
                ('memory_quota_gib', models.PositiveIntegerField(default=0, help_text='Memory in GiB the tenant may request in total (0: no memory quota).', validators=[django.core.validators.MaxValueValidator(100000000)])),
                ('created_at', models.DateTimeField(auto_now_add=True)),
            ],
            options={
                'ordering': ['slug'],
                'constraints': [models.CheckConstraint(condition=models.Q(('dev_ttl_hours__lte', models.F('max_ttl_hours'))), name='tenant_dev_ttl_within_max')],
            },
        ),
        migrations.CreateModel(
            name='AuditEvent',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('at', models.DateTimeField(auto_now_add=True, db_index=True)),
                ('actor_name', models.CharField(help_text='Kept when the user is deleted.', max_length=150)),
                ('action', models.CharField(max_length=64)),
                ('tenant_slug', models.CharField(blank=True, max_length=40)),
                ('object_type', models.CharField(max_length=64)),
                ('object_id', models.CharField(max_length=128)),
                ('object_repr', models.CharField(blank=True, max_length=200)),
                ('request_id', models.CharField(blank=True, max_length=64)),
                ('data', models.JSONField(blank=True, default=dict)),
                ('actor', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('tenant', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='audit_events', to='tenants.tenant')),
            ],
            options={
                'ordering': ['-at', '-id'],
            },
        ),
        migrations.CreateModel(
            name='Quota',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('gpus', models.PositiveIntegerField(default=0, validators=[django.core.validators.MaxValueValidator(1000000)])),
                ('borrow_limit', models.PositiveIntegerField(default=0, validators=[django.core.validators.MaxValueValidator(1000000)])),
                ('flavor', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='quotas', to='tenants.gpuflavor')),
                ('tenant', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='quotas', to='tenants.tenant')),
            ],
            options={
                'ordering': ['tenant__slug', 'flavor__name'],
                'constraints': [models.UniqueConstraint(fields=('tenant', 'flavor'), name='quota_unique')],
            },
        ),
        migrations.CreateModel(
            name='Membership',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('role', models.CharField(choices=[('admin', 'Admin'), ('engineer', 'Engineer'), ('viewer', 'Viewer')], max_length=16)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='memberships', to=settings.AUTH_USER_MODEL)),
                ('tenant', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='memberships', to='tenants.tenant')),
            ],
            options={
                'ordering': ['tenant__slug', 'user__username'],
                'constraints': [models.UniqueConstraint(fields=('tenant', 'user'), name='membership_unique')],
            },
        ),
        migrations.AddConstraint(
            model_name='tenant',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('namespace', 'default'), _negated=True), models.Q(('namespace__startswith', 'kube-'), _negated=True), ('namespace__endswith', models.F('slug'))), name='tenant_namespace_derived_not_kubernetes', violation_error_message="A tenant's namespace is its prefix plus its slug, never default or kube-*."),
        ),
        migrations.AddField(
            model_name='gpuflavor',
            name='max_node_count',
            field=models.PositiveIntegerField(blank=True, help_text="The most nodes the node group can grow to (a cluster autoscaler's maximum); empty or equal to node_count: it cannot grow.", null=True, validators=[django.core.validators.MaxValueValidator(100000)]),
        ),
        migrations.AddField(
            model_name='tenant',
            name='pod_security',
            field=models.CharField(choices=[('baseline', 'Baseline'), ('restricted', 'Restricted')], default='baseline', help_text='The Pod Security Standard its namespace enforces (warn and audit are always restricted).', max_length=16),
        ),
        migrations.AddField(
            model_name='tenant',
            name='idle_suspend_minutes',
            field=models.PositiveIntegerField(default=60, help_text='A dev cluster idle this long is warned, then suspended (0: never).', validators=[django.core.validators.MaxValueValidator(43200)]),
        ),
        migrations.AddField(
            model_name='tenant',
            name='idle_suspend_prod',
            field=models.BooleanField(default=False, help_text='Apply the idle policy to production clusters too (off: dev clusters only).'),
        ),
        migrations.AddField(
            model_name='quota',
            name='lend_limit',
            field=models.PositiveIntegerField(blank=True, help_text='GPUs of the unused nominal quota others in the cohort may borrow (empty: all of it).', null=True, validators=[django.core.validators.MaxValueValidator(1000000)]),
        ),
        migrations.AddField(
            model_name='tenant',
            name='archived_at',
            field=models.DateTimeField(blank=True, help_text='When a platform admin archived the tenant (it held nothing then); an archived tenant takes no new requests.', null=True),
        ),
        migrations.AddField(
            model_name='tenant',
            name='monthly_gpu_hour_budget',
            field=models.PositiveIntegerField(blank=True, help_text="GPU-hours the tenant may use per calendar month (empty: no budget). At 80% its pages show a banner; at 100% the platform's BUDGET_POLICY applies.", null=True, validators=[django.core.validators.MaxValueValidator(100000000)]),
        ),
        migrations.AddConstraint(
            model_name='quota',
            constraint=models.CheckConstraint(condition=models.Q(('lend_limit__isnull', True), ('lend_limit__lte', models.F('gpus')), _connector='OR'), name='quota_lends_at_most_nominal', violation_error_message='A tenant cannot lend more than its nominal quota.'),
        ),
        migrations.AddField(
            model_name='membership',
            name='source',
            field=models.CharField(choices=[('local', 'Granted in gangway'), ('provider', 'Identity provider')], default='local', max_length=16),
        ),
        migrations.CreateModel(
            name='ExternalIdentity',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('issuer', models.CharField(max_length=255)),
                ('subject', models.CharField(max_length=255)),
                ('groups', models.JSONField(blank=True, default=list)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('last_seen_at', models.DateTimeField(blank=True, null=True)),
                ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='external_identities', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('issuer', 'subject'), name='identity_unique')],
            },
        ),
        migrations.CreateModel(
            name='Cohort',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.CharField(max_length=40, unique=True, validators=[django.core.validators.RegexValidator('^[a-z]([-a-z0-9]{0,38}[a-z0-9])?$', 'Use 1-40 lowercase letters, digits and hyphens, starting with a letter and ending with a letter or digit.', code='invalid_slug')])),
                ('parent', models.CharField(blank=True, default='', help_text='The cohort this one lends to and borrows from (empty: it is a root).', max_length=40, validators=[django.core.validators.RegexValidator('^[a-z]([-a-z0-9]{0,38}[a-z0-9])?$', 'Use 1-40 lowercase letters, digits and hyphens, starting with a letter and ending with a letter or digit.', code='invalid_slug')])),
                ('description', models.CharField(blank=True, default='', max_length=200)),
                ('updated_at', models.DateTimeField(auto_now=True)),
            ],
            options={
                'ordering': ['name'],
                'constraints': [models.CheckConstraint(condition=models.Q(('parent', models.F('name')), _negated=True), name='cohort_not_its_own_parent', violation_error_message='A cohort cannot be its own parent.')],
            },
        ),
        migrations.AlterField(
            model_name='auditevent',
            name='action',
            field=models.CharField(max_length=64),
        ),
        migrations.AddIndex(
            model_name='auditevent',
            index=models.Index(fields=['action'], name='auditevent_action'),
        ),
        migrations.CreateModel(
            name='PasswordState',
            fields=[
                ('user', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name='password_state', serialize=False, to=settings.AUTH_USER_MODEL)),
                ('must_change', models.BooleanField(default=False)),
                ('changed_at', models.DateTimeField(blank=True, null=True)),
            ],
        ),
        migrations.AddField(
            model_name='gpuflavor',
            name='observed_nodes',
            field=models.PositiveIntegerField(blank=True, editable=False, null=True),
        ),
        migrations.AlterField(
            model_name='tenant',
            name='slug',
            field=models.CharField(help_text='1-40 lowercase letters, digits and hyphens, starting with a letter and not ending with a hyphen; not "default" and not starting with "kube-".', max_length=40, unique=True, validators=[tenants.slugs.TenantSlugValidator()]),
        ),
        migrations.AddField(
            model_name='tenant',
            name='allow_pip_direct_urls',
            field=models.BooleanField(default=False, help_text='Let jobs install pip packages from https:// URLs (name @ https://...); pip options such as --index-url are refused either way.'),
        ),
        migrations.CreateModel(
            name='SshKey',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.CharField(blank=True, max_length=100)),
                ('public_key', models.TextField()),
                ('fingerprint', models.CharField(max_length=100)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='ssh_keys', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'ordering': ['created_at', 'id'],
                'constraints': [models.UniqueConstraint(fields=('user', 'fingerprint'), name='sshkey_user_fingerprint')],
            },
        ),
    ]
