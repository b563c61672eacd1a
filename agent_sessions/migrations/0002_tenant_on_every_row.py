"""Every row of a session carries its tenant (the ledger, what the session was told, its changes), copied from its
session; and the hourly cleanup runs agent_sessions' task."""

import django.db.models.deletion
from django.db import migrations, models

CLEANUP = "ragsite: agent sessions cleanup"
CHILDREN = ("SessionDelivery", "SessionDocument", "SessionChange")


def tenant_from_session(apps, schema_editor):
    for name in CHILDREN:
        model = apps.get_model("agent_sessions", name)
        for session_id, tenant_id in apps.get_model("agent_sessions", "AgentSession").objects.values_list(
            "pk", "tenant_id"
        ):
            model.objects.filter(session_id=session_id).update(tenant_id=tenant_id)


def cleanup_here(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name=CLEANUP).update(
        func="agent_sessions.tasks.session_cleanup_task"
    )


def cleanup_in_knowledge(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name=CLEANUP).update(
        func="knowledge.tasks.session_cleanup_task"
    )


def tenant_field(null: bool) -> models.ForeignKey:
    return models.ForeignKey(
        null=null, on_delete=django.db.models.deletion.CASCADE, related_name="+", to="tenants.tenant"
    )


class Migration(migrations.Migration):
    dependencies = [
        ("agent_sessions", "0001_initial"),
        ("tenants", "0009_see_as_event"),
        ("django_q", "0018_task_success_index"),
    ]

    operations = [
        *(migrations.AddField(model_name=name.lower(), name="tenant", field=tenant_field(True)) for name in CHILDREN),
        migrations.RunPython(tenant_from_session, migrations.RunPython.noop),
        *(migrations.AlterField(model_name=name.lower(), name="tenant", field=tenant_field(False)) for name in CHILDREN),
        migrations.RunPython(cleanup_here, cleanup_in_knowledge),
    ]
