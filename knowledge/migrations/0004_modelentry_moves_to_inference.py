# ModelEntry now belongs to the inference app (its table stays where it is): state only, no SQL.

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('knowledge', '0003_catalog_enrichment'),
        ('chat', '0005_assistant_model_in_inference'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name='ModelEntry')],
            database_operations=[],
        ),
    ]
