from django.urls import path

from knowledge import views

app_name = "knowledge"

T = "t/<slug:tenant_slug>/"

urlpatterns = [
    path("operator/locations/", views.allowed_locations, name="allowed-locations"),
    path(f"{T}sources/", views.source_list, name="source-list"),
    path(f"{T}sources/drop/", views.source_drop, name="source-drop"),
    path(f"{T}sources/<uuid:source_id>/tags/", views.source_tags, name="source-tags"),
    path(f"{T}sources/<uuid:source_id>/access/", views.source_access, name="source-access"),
    path(f"{T}sources/<uuid:source_id>/access/preview/", views.source_access_preview, name="source-access-preview"),
    path(f"{T}sources/<uuid:source_id>/delete/", views.source_delete, name="source-delete"),
    path(f"{T}sources/<uuid:source_id>/sync/", views.source_sync, name="source-sync"),
    path(f"{T}sources/<uuid:source_id>/schedule/", views.source_schedule, name="source-schedule"),
    path(f"{T}sources/<uuid:source_id>/options/", views.source_options, name="source-options"),
    path(f"{T}sources/<uuid:source_id>/rights/", views.source_rights, name="source-rights"),
    path(f"{T}upload/", views.upload, name="upload"),
    path(f"{T}jobs/<uuid:job_id>/", views.job_detail, name="job-detail"),
    path(f"{T}jobs/<uuid:job_id>/progress/", views.job_progress, name="job-progress"),
    path(f"{T}jobs/<uuid:job_id>/retry/", views.job_retry, name="job-retry"),
    path(f"{T}documents/", views.document_list, name="document-list"),
    path(f"{T}documents/<uuid:document_id>/", views.document_detail, name="document-detail"),
    path(f"{T}read/<path:document_id>/", views.document_read, name="document-read"),
    path(f"{T}documents/<uuid:document_id>/critical/", views.document_critical, name="document-critical"),
    path(f"{T}documents/<uuid:document_id>/tags/", views.document_tags, name="document-tags"),
    path(f"{T}documents/<uuid:document_id>/access/", views.document_access, name="document-access"),
    path(
        f"{T}documents/<uuid:document_id>/access/preview/",
        views.document_access_preview,
        name="document-access-preview",
    ),
    path(f"{T}documents/<uuid:document_id>/validity/", views.document_validity, name="document-validity"),
    path(f"{T}documents/<uuid:document_id>/status/", views.document_status, name="document-status"),
    path(f"{T}chunks/<uuid:chunk_id>/critical/", views.chunk_critical, name="chunk-critical"),
    path(f"{T}chunks/<uuid:chunk_id>/tags/", views.chunk_tags, name="chunk-tags"),
    path(f"{T}search/", views.search_preview, name="search"),
]
