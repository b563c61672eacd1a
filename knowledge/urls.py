from django.urls import path

from knowledge import api

app_name = "knowledge-api"

T = "tenants/<slug:tenant_slug>/"

urlpatterns = [
    path(f"{T}sources/", api.SourceListApi.as_view(), name="source-list"),
    path(f"{T}sources/<uuid:source_id>/", api.SourceDetailApi.as_view(), name="source-detail"),
    path(f"{T}sources/<uuid:source_id>/upload/", api.SourceUploadApi.as_view(), name="source-upload"),
    path(f"{T}sources/<uuid:source_id>/sync/", api.SourceSyncApi.as_view(), name="source-sync"),
    path(f"{T}jobs/", api.JobListApi.as_view(), name="job-list"),
    path(f"{T}jobs/<uuid:job_id>/", api.JobDetailApi.as_view(), name="job-detail"),
    path(f"{T}jobs/<uuid:job_id>/cancel/", api.JobCancelApi.as_view(), name="job-cancel"),
    path(f"{T}jobs/<uuid:job_id>/retry/", api.JobRetryApi.as_view(), name="job-retry"),
    path(f"{T}documents/", api.DocumentListApi.as_view(), name="document-list"),
    path(f"{T}documents/<uuid:document_id>/", api.DocumentDetailApi.as_view(), name="document-detail"),
    path(f"{T}documents/<uuid:document_id>/retire/", api.DocumentRetireApi.as_view(), name="document-retire"),
    path(f"{T}changes/", api.ChangesApi.as_view(), name="changes"),
    path(f"{T}dify/retrieval", api.DifyRetrievalApi.as_view(), name="dify-retrieval"),
]
