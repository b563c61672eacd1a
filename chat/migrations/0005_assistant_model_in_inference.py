# Assistant.model now points at inference.ModelEntry: the same table, so the state changes and no SQL runs.

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('chat', '0004_assistant_validators'),
        ('inference', '0001_initial'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name='assistant',
                    name='model',
                    field=models.ForeignKey(blank=True, help_text='A chat model from the catalog; blank uses the default chain.', limit_choices_to={'kind': 'chat'}, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='inference.modelentry'),
                ),
            ],
            database_operations=[],
        ),
    ]
