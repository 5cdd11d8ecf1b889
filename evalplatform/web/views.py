from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from evalplatform.accounts.roles import ADMIN_ACCESS, FEATURES
from evalplatform.accounts.selectors import me_summary


@login_required
def home(request):
    summary = me_summary(request.user)
    for team in summary["teams"]:
        team["feature_rows"] = [(code, FEATURES[code]) for code in team["features"]]
        team["admin"] = ADMIN_ACCESS in team["features"]
    return render(request, "web/home.html", {"me": summary})
