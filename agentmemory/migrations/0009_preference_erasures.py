from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("agentmemory", "0008_idempotency_key")]

    operations = [
        migrations.AddField(
            model_name="memorypreference",
            name="erasures",
            field=models.PositiveIntegerField(default=0),
        ),
    ]
