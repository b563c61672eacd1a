from django.urls import path

from chat import api, openai_api, recall_views, see_as, views

app_name = "chat"

urlpatterns = [
    path("t/<slug:tenant_slug>/chat/", views.chat_page, name="chat-page"),
    path("t/<slug:tenant_slug>/chat/ask/", views.chat_ask, name="chat-ask"),
    path("t/<slug:tenant_slug>/chat/sessions/", views.chat_sessions, name="chat-sessions"),
    path("t/<slug:tenant_slug>/chat/answers/<str:answer_id>/verdict/", views.answer_verdict, name="answer-verdict"),
    path("t/<slug:tenant_slug>/see-as/", see_as.see_as, name="see-as"),  # tenant admins: the access simulator
    path("t/<slug:tenant_slug>/chat/answers/<str:answer_id>/receipt/", recall_views.receipt_page, name="receipt"),
    path("t/<slug:tenant_slug>/chat/receipts.jsonl", recall_views.receipts_export, name="receipts-export"),
    path("t/<slug:tenant_slug>/chat/recalled/", recall_views.recalled_inbox, name="recalled"),
    path("t/<slug:tenant_slug>/chat/digest/", recall_views.digest_page, name="digest"),
    path("t/<slug:tenant_slug>/retention/", recall_views.retention_page, name="retention"),  # tenant admins
    path("t/<slug:tenant_slug>/keys/<str:key_id>/webhook/", recall_views.key_webhook, name="key-webhook"),  # admins
]

api_urlpatterns = [
    path("tenants/<slug:tenant_slug>/answer/", api.AnswerApi.as_view(), name="answer"),
    path("tenants/<slug:tenant_slug>/answers/<str:answer_id>/verdicts/", api.VerdictApi.as_view(), name="verdicts"),
    path("tenants/<slug:tenant_slug>/answers/<str:answer_id>/receipt/", api.ReceiptApi.as_view(), name="receipt"),
    path("tenants/<slug:tenant_slug>/receipts/", api.ReceiptExportApi.as_view(), name="receipts-export"),
]

openai_urlpatterns = [
    path("models", openai_api.ModelsApi.as_view(), name="models"),
    path("models/<path:model>", openai_api.ModelApi.as_view(), name="model"),
    path("chat/completions", openai_api.ChatCompletionsApi.as_view(), name="chat-completions"),
]
