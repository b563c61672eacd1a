from django.urls import path

from feedback import api

app_name = "feedback-api"

T = "tenants/<slug:tenant_slug>/"

urlpatterns = [
    path(f"{T}review/", api.ReviewListApi.as_view(), name="review-list"),
    path(f"{T}review/<uuid:document_id>/", api.ReviewActionApi.as_view(), name="review-action"),
]
