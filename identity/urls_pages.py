from django.urls import path

from identity import views

app_name = "identity-pages"
T = "t/<slug:tenant_slug>/"

urlpatterns = [
    path(f"{T}keys/scim/", views.scim_tokens, name="scim-tokens"),  # tenant admins
    path(f"{T}keys/scim/<uuid:token_id>/revoke/", views.scim_token_revoke, name="scim-token-revoke"),  # tenant admins
    path(f"{T}identity/", views.providers, name="providers"),  # tenant admins
    path(f"{T}identity/new/", views.provider_edit, name="provider-new"),  # tenant admins
    path(f"{T}identity/<uuid:provider_id>/", views.provider_edit, name="provider-edit"),  # tenant admins
    path(f"{T}identity/<uuid:provider_id>/delete/", views.provider_delete, name="provider-delete"),  # tenant admins
    path(f"{T}identity/<uuid:provider_id>/sync/", views.provider_sync, name="provider-sync"),  # tenant admins
]
