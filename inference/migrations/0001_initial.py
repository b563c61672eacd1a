# The catalog table was created by knowledge/0003 and moves here unchanged: state only, no SQL.

from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('knowledge', '0003_catalog_enrichment'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='ModelEntry',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('name', models.CharField(max_length=100, unique=True)),
                        ('kind', models.CharField(choices=[('chat', 'Chat'), ('embedding', 'Embedding'), ('enrichment', 'Enrichment')], max_length=20)),
                        ('path', models.CharField(max_length=1000)),
                        ('size_bytes', models.PositiveBigIntegerField(blank=True, editable=False, null=True)),
                        ('context_length', models.PositiveIntegerField(blank=True, editable=False, null=True)),
                        ('loads', models.BooleanField(editable=False, help_text='Whether it loaded when last checked.', null=True)),
                        ('load_error', models.TextField(blank=True, editable=False)),
                        ('packaged', models.BooleanField(default=False, editable=False)),
                        ('checked_at', models.DateTimeField(blank=True, editable=False, null=True)),
                    ],
                    options={
                        'verbose_name': 'model',
                        'ordering': ['kind', 'name'],
                        'db_table': 'knowledge_modelentry',
                    },
                ),
            ],
            database_operations=[],
        ),
    ]
