from django.contrib import admin

from chat.models import Assistant, ChatMessage, ChatSession
from tenants.admin import TenantScopedAdmin, TenantScopedReadOnlyInline


@admin.register(Assistant)
class AssistantAdmin(TenantScopedAdmin):
    list_display = ["name", "tenant", "description", "model_path", "temperature", "top_k"]
    list_filter = [("tenant", admin.RelatedOnlyFieldListFilter)]
    search_fields = ["name", "description"]


MESSAGE_FIELDS = ("role", "text", "model", "generated", "status", "citations", "ttft_ms", "total_ms", "created_at")


class ChatMessageInline(TenantScopedReadOnlyInline):
    model = ChatMessage
    fields = MESSAGE_FIELDS
    readonly_fields = MESSAGE_FIELDS


@admin.register(ChatSession)
class ChatSessionAdmin(TenantScopedAdmin):
    list_display = ["__str__", "tenant", "user", "assistant", "updated_at"]
    list_filter = [("tenant", admin.RelatedOnlyFieldListFilter)]
    inlines = [ChatMessageInline]
    readonly_fields = ["tenant", "user", "assistant", "title"]
