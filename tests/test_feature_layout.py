"""The review app's feature packages (issue 36): each keeps its templates in its own
``templates/`` folder, under the names they always had, and the loader finds every one of
them there, none shadowed by (or shadowing) a template of the same name elsewhere."""

from pathlib import Path

from django.conf import settings
from django.template.loader import get_template

ROOT = Path(settings.BASE_DIR)
FEATURES = ("fixes", "memories", "prflow", "rules", "triage")


def test_each_feature_package_has_its_templates_folder_in_the_loaders_dirs():
    dirs = [Path(d) for d in settings.TEMPLATES[0]["DIRS"]]
    for feature in FEATURES:
        assert ROOT / "reviews_app" / feature / "templates" in dirs, feature


def test_every_feature_template_loads_from_its_package_under_its_old_name():
    found = 0
    folders = [ROOT / "templates", *(ROOT / "reviews_app").glob("*/templates")]
    for feature in FEATURES:
        folder = ROOT / "reviews_app" / feature / "templates"
        for path in folder.rglob("*.html"):
            name = path.relative_to(folder).as_posix()
            assert name.startswith("reviews_app/"), name
            assert Path(get_template(name).origin.name) == path, name
            assert [f for f in folders if (f / name).exists()] == [folder], name
            found += 1
    assert found >= 10
