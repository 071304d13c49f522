"""Issue 16's "done when": a walk of every page at 1366×768 and 1920×1080 shows no clipped control.

The pages are the app's routes (tests/e2e/test_console_clean.py reads them from the app), each
opened signed out and then signed in as the administrator, in real Chromium at both sizes.

A page's *primary buttons* are every enabled `button` and `a[role=button]` that is rendered with a
size (so nothing inside a closed menu, dialog or inactive tab, which Radix does not render): the
header's, the toolbars' and the main column's (the navigation has links only). In a table, the
buttons of the first ROWS_PER_TABLE rows stand for the rows below, which are drawn alike. Each one
must be within the window once scrolled into view, with the page scrolled vertically only (a page
wider than the window clips), and clickable: Playwright's actionability checks of
`click(trial=True)` (visible, stable, enabled, receiving the click — not covered by anything).
"""

from __future__ import annotations

import re

from playwright.sync_api import Error, Page, expect

from tests.e2e.conftest import ADMIN_PASSWORD, RunningApp
from tests.e2e.test_console_clean import open_page, page_paths
from tests.e2e.test_workflows_ui import sign_in

pytestmark = __import__("pytest").mark.e2e

SIZES = ({"width": 1366, "height": 768}, {"width": 1920, "height": 1080})
ROWS_PER_TABLE = 3
TRIAL_TIMEOUT_MS = 5_000
MARK = "data-viewport-walk"

# Marks the page's primary buttons with MARK = their index; returns a label for each.
MARK_PRIMARY_BUTTONS = f"""(rowsPerTable) => {{
  document.querySelectorAll('[{MARK}]').forEach(el => el.removeAttribute('{MARK}'));
  const labels = [];
  for (const el of document.querySelectorAll('button, a[role=button]')) {{
    if (el.disabled || el.getAttribute('aria-disabled') === 'true') continue;
    const box = el.getBoundingClientRect();
    if (!box.width || !box.height || getComputedStyle(el).visibility === 'hidden') continue;
    const row = el.closest('tbody > tr');
    if (row && Array.prototype.indexOf.call(row.parentElement.children, row) >= rowsPerTable) continue;
    el.setAttribute('{MARK}', String(labels.length));
    const text = (el.innerText || '').trim().replace(/\\s+/g, ' ');
    labels.push((el.id ? '#' + el.id + ' ' : '') + (text || el.getAttribute('title') || el.getAttribute('aria-label')
                || el.getAttribute('role') || el.className.toString().slice(0, 60)));
  }}
  return labels;
}}"""


def page_problems(page: Page, path: str, checked: list[str]) -> list[str]:
    """What is wrong with the primary buttons of the open page, at the current window size; the
    buttons looked at are added to `checked`."""
    size = page.viewport_size
    problems = []
    width = page.evaluate("() => document.documentElement.scrollWidth")
    if width > size["width"] + 1:
        problems.append(f"{path}: the page is wider than the window ({width} px)")
    labels = page.evaluate(MARK_PRIMARY_BUTTONS, ROWS_PER_TABLE)
    checked += [f"{path} {label}" for label in labels]
    for index, label in enumerate(labels):
        button = page.locator(f"[{MARK}='{index}']")
        if button.count() != 1:  # re-rendered meanwhile: its label is still checked on the next size
            continue
        try:
            button.scroll_into_view_if_needed(timeout=TRIAL_TIMEOUT_MS)
            box = button.bounding_box()
            scrolled_x = page.evaluate("() => window.scrollX")
            if box is None or scrolled_x or box["x"] < 0 or box["y"] < 0 or \
                    box["x"] + box["width"] > size["width"] + 0.5 or box["y"] + box["height"] > size["height"] + 0.5:
                problems.append(f"{path}: '{label}' is not within the window: {box}, page scrolled {scrolled_x} px "
                                "to the side")
                continue
            button.click(trial=True, timeout=TRIAL_TIMEOUT_MS)
        except Error as exc:
            problems.append(f"{path}: '{label}' is not clickable: {str(exc).splitlines()[0]}")
    return problems


def walk(page: Page, paths: list[str], checked: list[str]) -> list[str]:
    """Every page at every size: the problems found."""
    problems = []
    for size in SIZES:
        page.set_viewport_size(size)
        for path in paths:
            open_page(page, path)
            problems += [f"{size['width']}×{size['height']} {p}" for p in page_problems(page, path, checked)]
    return problems


def test_every_primary_button_is_within_the_window_and_clickable(page: Page, running_app: RunningApp):
    paths = page_paths(running_app)
    checked: list[str] = []
    problems = walk(page, paths, checked)  # signed out
    assert any("#login-submit" in label for label in checked) and any("#form-submit" in label for label in checked)
    sign_in(page, "admin", ADMIN_PASSWORD)
    expect(page).to_have_url(re.compile(r"/workflows$"))
    problems += walk(page, paths, checked)  # signed in as the administrator
    for button in ("#logout-button", "#test-run", "#create-token", "#monitor-kind"):  # a few it must have seen
        assert any(button in label for label in checked), f"{button} was not among the buttons checked"
    assert not problems, "clipped or covered buttons:\n" + "\n".join(problems)


def test_the_walk_finds_clipped_covered_and_too_wide(page: Page):
    """The checker itself: on a page with a button beyond the right edge, one under an overlay and
    a fitting one, it names the first two and the page's width, and passes the third."""
    page.set_viewport_size(SIZES[0])
    page.set_content("""
        <body style="margin:0">
          <button id="fits">Fits</button>
          <div style="width:1600px"><button id="clipped" style="margin-left:1500px">Clipped</button></div>
          <div style="position:relative; width:10em">
            <button id="covered">Covered</button>
            <div style="position:absolute; inset:0; background:#fff8"></div>
          </div>
          <button id="closed" style="display:none">In a closed menu</button>
          <table><tbody><tr><td><button>Row 1</button></td></tr><tr><td><button>Row 2</button></td></tr>
            <tr><td><button>Row 3</button></td></tr><tr><td><button id="row4">Row 4</button></td></tr></tbody></table>
        </body>""")
    checked: list[str] = []
    problems = page_problems(page, "/test", checked)
    assert any("wider than the window" in p for p in problems)
    assert any("'#clipped Clipped' is not within the window" in p for p in problems)
    assert any("'#covered Covered' is not clickable" in p for p in problems)
    assert not any("#fits" in p for p in problems) and any("#fits" in label for label in checked)
    assert len(problems) == 3, problems
    assert not any("closed" in label or "row4" in label for label in checked)
    assert any("Row 3" in label for label in checked)
