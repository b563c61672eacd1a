from django.urls import path

from insights import views

app_name = "insights"

urlpatterns = [
    path("t/<slug:tenant_slug>/insights/", views.insights_page, name="insights"),  # tenant admins
    path("t/<slug:tenant_slug>/insights/owners/", views.owners_page, name="owners"),  # tenant admins
    path("t/<slug:tenant_slug>/gaps/", views.gaps_page, name="gaps"),  # admins: every gap; members: theirs
    path("t/<slug:tenant_slug>/gaps/<str:gap_id>/", views.gap_detail, name="gap"),  # its owner, or an admin
    path("operator/insights/", views.operator_insights, name="operator"),  # operators: no question text
]
