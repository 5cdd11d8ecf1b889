from django.contrib.auth import views as auth_views
from django.urls import path

from evalplatform.accounts.throttle import ThrottledAuthenticationForm
from evalplatform.web import views

urlpatterns = [
    path("", views.home, name="home"),
    path(
        "login/",
        auth_views.LoginView.as_view(
            template_name="web/login.html", authentication_form=ThrottledAuthenticationForm
        ),
        name="login",
    ),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("notifications/dismiss", views.dismiss_notifications, name="notifications-dismiss"),
]
