"""The rules guardian's findings through the real engine with the offline model: persisted with
the rule they break (Finding.rule), shown on the review page with the rule, and a rule the
offline model cannot check is said to be not checked."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from agents_app import engine
from reviews_app import services
from reviews_app.models import Finding, Review

DIFF = """diff --git a/app/report.py b/app/report.py
new file mode 100644
index 0000000..1111111
--- /dev/null
+++ b/app/report.py
@@ -0,0 +1,5 @@
+def report(rows):
+    total = sum(r.amount for r in rows)
+    print("total", total)
+    print("<b>rows</b>", len(rows))
+    return total
"""

DB_RULE = {"id": "rule:5", "title": "No print calls <b>", "text": "Use logging, never print().",
           "path_glob": "app/**", "severity": "medium", "pattern": r"\bprint\(",
           "source": "rejections"}
TOML_RULE = {"text": "Public functions have a docstring.", "scope": "repository",
             "path_glob": "**", "severity": "low"}


@pytest.fixture
def rule_run(transactional_db, alice):
    inp = services.from_text(DIFF)
    run = services.start_review(alice, inp, services.prepare(inp), enqueue=False,
                                options={"review_rules": [DB_RULE], "rules": [TOML_RULE]})
    run = engine.run_inline(run.pk)
    assert run.status == "awaiting_triage", run.error
    return run


def test_a_guardian_finding_is_persisted_with_its_rule_and_shown(alice_client, rule_run):
    review = Review.objects.get(run=rule_run)
    [f] = Finding.objects.filter(review=review, reviewer="rules")
    assert f.kept and f.key == "RUL-1" and f.severity == "medium" and f.line == 3
    assert f.rule == {"id": "rule:5", "title": DB_RULE["title"], "text": DB_RULE["text"],
                      "source": "rejections", "how": "pattern"}
    assert f.locations == [{"file": "app/report.py", "line": 4, "end_line": None}]
    assert any("Public functions have a docstring." in n and "was not checked: the offline "
               "model reads no code" in n for n in review.notes)
    html = alice_client.get(reverse("review_detail", args=[rule_run.pk])).content.decode()
    assert "Breaks review rule:" in html and "No print calls &lt;b&gt;" in html
    assert "<b>" not in html.split('id="rule-of-RUL-1"', 1)[1].split("</div>", 1)[0]
    assert "rule #5" in html and "generated from rejected findings" in html
    assert "found by the rule's pattern" in html
    assert "Use logging, never print()." in html  # the rule text, in its details


def test_another_user_and_anonymous_do_not_see_the_rule_finding(bob_client, rule_run):
    url = reverse("review_detail", args=[rule_run.pk])
    assert bob_client.get(url).status_code == 404
    response = Client().get(url)
    assert response.status_code == 302 and "login" in response["Location"]
