from django.urls import path

from identity import views

app_name = "identity-pages"
T = "t/<slug:tenant_slug>/"

urlpatterns = [
    path(f"{T}keys/scim/", views.scim_tokens, name="scim-tokens"),  # tenant admins
    path(f"{T}keys/scim/<uuid:token_id>/revoke/", views.scim_token_revoke, name="scim-token-revoke"),  # tenant admins
]
