"""The agent sessions' models, taken over from knowledge with their tables (knowledge 0023 made them)."""

import django.db.models.deletion
import django.utils.timezone
import uuid
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('knowledge', '0027_agent_sessions_moved'),
        ('tenants', '0009_see_as_event'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        # The tables knowledge's migrations made (0023) are taken as they are: only the state moves here.
        migrations.SeparateDatabaseAndState(
            state_operations=[
        migrations.CreateModel(
            name='AgentSession',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('public_id', models.UUIDField(default=uuid.uuid4, editable=False, unique=True)),
                ('purpose', models.CharField(blank=True, max_length=500)),
                ('scope', models.JSONField(blank=True, default=dict, help_text='source_ids and tags every call in it is held to.')),
                ('ttl_seconds', models.PositiveIntegerField()),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('last_used_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('expires_at', models.DateTimeField(db_index=True, help_text='last_used_at + ttl: a session in use lives on.')),
                ('ended_at', models.DateTimeField(blank=True, null=True)),
                ('calls', models.PositiveIntegerField(default=0)),
                ('tokens_delivered', models.PositiveBigIntegerField(default=0)),
                ('base_pack', models.JSONField(blank=True, default=dict, help_text='What its bootstrap delivered and left out.')),
                ('changes_read', models.PositiveBigIntegerField(default=0, help_text='The last change (SessionChange pk) read.')),
                ('latest_change', models.PositiveBigIntegerField(default=0, help_text='The last change (SessionChange pk) found.')),
                ('api_key', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='tenants.apikey')),
                ('tenant', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='tenants.tenant')),
                ('user', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'db_table': 'knowledge_agentsession',
            },
        ),
        migrations.CreateModel(
            name='SessionChange',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('kind', models.CharField(choices=[('changed', 'Changed'), ('superseded', 'Superseded'), ('expired', 'Expired'), ('retired', 'Retired'), ('no_longer_available', 'No longer available')], max_length=30)),
                ('document_id_text', models.CharField(max_length=1900)),
                ('at', models.DateTimeField(default=django.utils.timezone.now)),
                ('detail', models.JSONField(blank=True, default=dict)),
                ('session', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='changes', to='agent_sessions.agentsession')),
            ],
            options={
                'db_table': 'knowledge_sessionchange',
                'ordering': ['pk'],
            },
        ),
        migrations.CreateModel(
            name='SessionDelivery',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('chunk_id', models.CharField(max_length=2000)),
                ('content_hash', models.CharField(max_length=64)),
                ('point_id', models.CharField(blank=True, max_length=36)),
                ('document_id_text', models.CharField(max_length=1900)),
                ('version', models.PositiveIntegerField()),
                ('call', models.PositiveIntegerField(help_text="The session's call that delivered it (1 = first).")),
                ('via', models.CharField(max_length=20)),
                ('whole', models.BooleanField(default=True, help_text='False: only an excerpt (bootstrap).')),
                ('tokens', models.PositiveIntegerField(default=0)),
                ('at', models.DateTimeField(default=django.utils.timezone.now)),
                ('document', models.ForeignKey(null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='knowledge.document')),
                ('session', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='deliveries', to='agent_sessions.agentsession')),
            ],
            options={
                'db_table': 'knowledge_sessiondelivery',
                'indexes': [models.Index(fields=['session', 'point_id'], name='session_delivery_point')],
                'constraints': [models.UniqueConstraint(fields=('session', 'chunk_id', 'content_hash'), name='session_delivery_once')],
            },
        ),
        migrations.CreateModel(
            name='SessionDocument',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('document_id_text', models.CharField(max_length=1900)),
                ('version', models.PositiveIntegerField()),
                ('retired', models.BooleanField(default=False)),
                ('expired', models.BooleanField(default=False)),
                ('superseded_by', models.BigIntegerField(blank=True, null=True)),
                ('available', models.BooleanField(default=True)),
                ('older', models.BooleanField(default=False)),
                ('document', models.ForeignKey(null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='knowledge.document')),
                ('session', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='documents', to='agent_sessions.agentsession')),
            ],
            options={
                'db_table': 'knowledge_sessiondocument',
                'constraints': [models.UniqueConstraint(fields=('session', 'document_id_text'), name='session_document_once')],
            },
        ),
    ],
            database_operations=[],
        ),
    ]
