from django.urls import path

from feedback import views

app_name = "feedback"

urlpatterns = [
    path("t/<slug:tenant_slug>/curation/", views.queue_page, name="queue"),
    path("t/<slug:tenant_slug>/review/", views.review_list, name="review"),
    path("t/<slug:tenant_slug>/contradictions/<uuid:conflict_id>/", views.conflict_resolve, name="conflict-resolve"),
    path("t/<slug:tenant_slug>/review/<uuid:document_id>/", views.review_act, name="review-act"),
    path("t/<slug:tenant_slug>/curation/<str:item_id>/", views.item_page, name="item"),
    path("t/<slug:tenant_slug>/curation/<str:item_id>/fix/", views.item_fix, name="item-fix"),
    path("t/<slug:tenant_slug>/evaluation/", views.evaluation_page, name="evaluation"),
    path("t/<slug:tenant_slug>/evaluation/run/", views.evaluation_start, name="evaluation-start"),
    path("t/<slug:tenant_slug>/evaluation/runs/<str:run_id>/", views.evaluation_run_page, name="evaluation-run"),
    path("t/<slug:tenant_slug>/evaluation/export.jsonl", views.evaluation_export, name="evaluation-export"),
]
