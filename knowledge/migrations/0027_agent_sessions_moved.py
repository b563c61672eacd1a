"""Agent sessions move to their own app (agent_sessions): knowledge forgets the models, the tables stay."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("knowledge", "0026_source_config"),
    ]

    operations = [
        # The tables stay where they are: the models now belong to the agent_sessions app (its 0001 takes them).
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveField(
                    model_name="sessiondelivery",
                    name="session",
                ),
                migrations.RemoveField(
                    model_name="sessiondocument",
                    name="session",
                ),
                migrations.RemoveField(
                    model_name="sessionchange",
                    name="session",
                ),
                migrations.RemoveField(
                    model_name="sessiondelivery",
                    name="document",
                ),
                migrations.RemoveField(
                    model_name="sessiondocument",
                    name="document",
                ),
                migrations.DeleteModel(
                    name="AgentSession",
                ),
                migrations.DeleteModel(
                    name="SessionChange",
                ),
                migrations.DeleteModel(
                    name="SessionDelivery",
                ),
                migrations.DeleteModel(
                    name="SessionDocument",
                ),
            ],
            database_operations=[],
        ),
    ]
