"""A source kind's own options move to one typed config (knowledge/ingest/sources.py): a git source's branch and
history depth into `Source.config`, the commit its last sync read into `Source.sync_state`; a job kind for the syncs
of kinds added later."""

from django.db import migrations, models


def git_columns_into_config(apps, schema_editor):
    Source = apps.get_model("knowledge", "Source")
    for source in Source.objects.exclude(branch="", history_depth=None, synced_commit=""):
        config = dict(source.config or {})
        if source.branch:
            config["branch"] = source.branch
        if source.history_depth:
            config["history_depth"] = source.history_depth
        state = dict(source.sync_state or {})
        if source.synced_commit:
            state["commit"] = source.synced_commit
        Source.objects.filter(pk=source.pk).update(config=config, sync_state=state)


def config_into_git_columns(apps, schema_editor):
    Source = apps.get_model("knowledge", "Source")
    for source in Source.objects.filter(kind="git"):
        config, state = source.config or {}, source.sync_state or {}
        Source.objects.filter(pk=source.pk).update(
            branch=config.get("branch", ""),
            history_depth=config.get("history_depth"),
            synced_commit=state.get("commit", ""),
        )


class Migration(migrations.Migration):
    dependencies = [
        ("knowledge", "0025_version_own_access_index"),
    ]

    operations = [
        migrations.AddField(
            model_name="source",
            name="config",
            field=models.JSONField(
                blank=True,
                default=dict,
                help_text="Its kind's own options (a git source's branch and history depth): "
                "knowledge/ingest/sources.py.",
            ),
        ),
        migrations.RunPython(git_columns_into_config, config_into_git_columns),
        migrations.RemoveField(model_name="source", name="branch"),
        migrations.RemoveField(model_name="source", name="history_depth"),
        migrations.RemoveField(model_name="source", name="synced_commit"),
        migrations.AlterField(
            model_name="ingestjob",
            name="kind",
            field=models.CharField(
                choices=[
                    ("sync", "Sync"),
                    ("folder", "Folder sync"),
                    ("git", "Git sync"),
                    ("web", "Website sync"),
                    ("upload", "Upload"),
                    ("reindex", "Reindex"),
                ],
                max_length=20,
            ),
        ),
    ]
