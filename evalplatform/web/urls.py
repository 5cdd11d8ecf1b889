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
    # Every role changes its own password here (evaluators have no admin console); a new
    # password ends the other sessions and revokes the API tokens (accounts.apps).
    path(
        "account/password/",
        auth_views.PasswordChangeView.as_view(
            template_name="web/password_change.html", success_url="/account/password/done/"
        ),
        name="password-change",
    ),
    path(
        "account/password/done/",
        auth_views.PasswordChangeDoneView.as_view(template_name="web/password_changed.html"),
        name="password-changed",
    ),
    path("notifications/dismiss", views.dismiss_notifications, name="notifications-dismiss"),
]
