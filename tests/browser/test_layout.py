"""Layout a person can use: the Add-judge form's fields never overlap, even with long model
names, and the keyboard hints on buttons are readable (WCAG AA contrast, 4.5:1)."""

from __future__ import annotations

import re

from evalplatform.accounts.roles import Role
from tests.factories import ConnectionFactory, LLMModelFactory
from tests.helpers.browser import sign_in, sign_in_as


def overlap(a, b):
    return not (
        a["x"] + a["width"] <= b["x"]
        or b["x"] + b["width"] <= a["x"]
        or a["y"] + a["height"] <= b["y"]
        or b["y"] + b["height"] <= a["y"]
    )


def test_the_add_judge_form_fields_do_not_overlap(page, setup, team_a, member):
    member(team_a, Role.MANAGER, username="mgr")
    name = "A judge model with a display name far longer than its column " * 2
    LLMModelFactory(connection=ConnectionFactory(team=team_a, kind="mock"), display_name=name)
    sign_in_as(page, "mgr")
    for width in (900, 1280):
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(f"/scenarios/{setup['comparison'].pk}#judges")
        fields = page.locator("#judges form.cols > label")
        boxes = [fields.nth(i).bounding_box() for i in range(fields.count())]
        assert len(boxes) >= 9
        for i, a in enumerate(boxes):
            for b in boxes[i + 1 :]:
                assert not overlap(a, b), (width, a, b)
        controls = page.locator("#judges form.cols > label > :is(input, select, textarea)")
        for i in range(controls.count()):
            box, cell = controls.nth(i).bounding_box(), controls.nth(i).locator("..").bounding_box()
            assert box["x"] + box["width"] <= cell["x"] + cell["width"] + 1, (width, i)


def luminance(rgb):
    def channel(c):
        c /= 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (channel(c) for c in rgb)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def test_keyboard_hints_on_buttons_are_readable(page, setup):
    sign_in(page, "eve")
    page.goto(f"/evaluate/scenarios/{setup['rating'].pk}")
    page.wait_for_selector("button[type=submit] small")
    fg, bg, opacity = page.evaluate(
        """() => { const hint = document.querySelector('button[type=submit] small');
        const style = getComputedStyle(hint);
        return [style.color, getComputedStyle(hint.closest('button')).backgroundColor,
                style.opacity]; }"""
    )
    fg_rgb = [int(v) for v in re.findall(r"\d+", fg)[:3]]
    bg_rgb = [int(v) for v in re.findall(r"\d+", bg)[:3]]
    alpha = float(opacity)
    shown = [alpha * f + (1 - alpha) * b for f, b in zip(fg_rgb, bg_rgb, strict=True)]
    light, dark = sorted((luminance(shown), luminance(bg_rgb)), reverse=True)
    assert (light + 0.05) / (dark + 0.05) >= 4.5, (fg, bg, opacity)
