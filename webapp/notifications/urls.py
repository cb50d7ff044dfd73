from django.urls import path

from webapp.notifications import views

app_name = "notifications"

urlpatterns = [
    path("subscriptions/", views.SubscriptionListView.as_view(), name="subscriptions"),
    path(
        "subscriptions/<int:pk>/edit/",
        views.SubscriptionEditView.as_view(),
        name="subscription-edit",
    ),
    path(
        "subscriptions/<int:pk>/delete/",
        views.SubscriptionDeleteView.as_view(),
        name="subscription-delete",
    ),
    path("notifications/deliveries/", views.DeliveryListView.as_view(), name="deliveries"),
]
