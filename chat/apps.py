from django.apps import AppConfig


class ChatConfig(AppConfig):
    name = "chat"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        """A document's change, a change of its readers and a change of someone's access each bring a recall scan
        soon after they commit (chat/recall.py; the minute schedule catches anything else, expiry included)."""
        from django.db.models.signals import post_save

        from chat.tasks import recall_scan_soon
        from knowledge.access import readers_changed
        from knowledge.models import DocumentEvent
        from tenants.models import MembershipEvent

        post_save.connect(recall_scan_soon, sender=DocumentEvent, dispatch_uid="chat-recall-document-event")
        post_save.connect(recall_scan_soon, sender=MembershipEvent, dispatch_uid="chat-recall-membership-event")
        readers_changed.connect(recall_scan_soon, dispatch_uid="chat-recall-readers")
