from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from evalplatform import validation
from evalplatform.accounts.models import Notification
from evalplatform.accounts.roles import ACCOUNTS_VIEW, ADMIN_ACCESS, EVALUATIONS_VIEW_ALL, FEATURES
from evalplatform.accounts.selectors import me_summary
from evalplatform.accounts.services import notifications_dismiss
from evalplatform.web.home import sections_for
from evalplatform.web.redirects import safe_next


@login_required
def home(request):
    summary = me_summary(request.user)
    for team in summary["teams"]:
        team["feature_rows"] = [(code, FEATURES[code]) for code in team["features"]]
        team["admin"] = ADMIN_ACCESS in team["features"]
        team["groups"] = ACCOUNTS_VIEW in team["features"]
        # The team's default trust gate for its LLM judges (the evaluations app's page).
        team["trust_gate"] = EVALUATIONS_VIEW_ALL in team["features"]
    unread = Notification.objects.filter(user=request.user, read_at__isnull=True)
    return render(
        request,
        "web/home.html",
        {
            "me": summary,
            "notifications": unread.select_related("team")[:20],
            "sections": sections_for(request.user),
        },
    )


@login_required
@require_POST
def dismiss_notifications(request):
    """Dismiss the listed notifications (``id`` fields), or all; then go back."""
    posted = request.POST.getlist("id")
    ids = [n for i in posted if (n := validation.digits(i)) is not None]
    notifications_dismiss(user=request.user, ids=ids if posted else None)
    return redirect(safe_next(request, reverse("home")))
