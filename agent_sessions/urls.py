from django.urls import path

from agent_sessions import api

app_name = "sessions-api"

T = "tenants/<slug:tenant_slug>/"

urlpatterns = [
    path(f"{T}retrieve/", api.RetrieveApi.as_view(), name="retrieve"),
    path(f"{T}bootstrap/", api.BootstrapApi.as_view(), name="bootstrap"),
    path(f"{T}sessions/", api.SessionListApi.as_view(), name="session-list"),
    path(f"{T}sessions/<uuid:session_id>/", api.SessionDetailApi.as_view(), name="session-detail"),
    path(f"{T}sessions/<uuid:session_id>/changes/", api.SessionChangesApi.as_view(), name="session-changes"),
]
