"""The review's language lookup by file name (``classify.lexer_class_for``) gives exactly
what Pygments' ``find_lexer_class_for_filename`` gives, for a name made from every file name
pattern Pygments knows and for names people have, without compiling ~930 patterns first."""

import re

import pytest
from pygments.lexers import find_lexer_class_for_filename
from pygments.lexers._mapping import LEXERS
from pygments.plugin import find_plugin_lexers

from reviews_app.pipeline.diffs import classify

COMMON = ["users.py", "src/users.ts", "a.tsx", "a.jsx", "app.js", "x.min.js", "main.go",
          "Main.java", "build.sh", "Dockerfile", "Makefile", "Makefile.am", "CMakeLists.txt",
          ".bashrc", ".bash_profile", "bash_logout", "x.h", "x.hpp", "x.cpp", "x.c",
          "README.md", "x.json", "x.yaml", "x.yml", "x.toml", "setup.cfg", "x.PY", "X.Py",
          "no_extension", "", ".", "..", "x.", "x.py.bak", "x.tar.gz", "page.php5",
          "page.php7", "man.1", "man.0", "icon.xpm", "icon.xcm", "x.lasso9", "Kconfig-x",
          "x.gsed", "x.ssed", "pyproject.toml", "requirements.txt", "x.sql", "x.rb", "x.rs",
          "x.kt", "x.swift", "x.cs", "x.vue", "x.svelte", "x.scss", "x.html", "x.xml",
          "weird[1].py", "a*b.py", "q?.py", "x.ipynb", "x.pyi", "SConstruct", "x.pl",
          "x.pm", "x.m", "x.mm", "x.r", "x.R", "x.jl", "x.ex", "x.exs", "x.erl", "x.hs"]


def names_from_patterns() -> list[str]:
    names = []
    for _module, _name, _aliases, globs, _mimetypes in LEXERS.values():
        for glob in globs:
            plain = re.sub(r"\[([^\]]+)\]", lambda m: m.group(1)[0], glob)
            names += [plain.replace("*", "x").replace("?", "a"),
                      plain.replace("*", "").replace("?", "b"),
                      "dir-" + plain.replace("*", "y.z")]
    return names


def test_no_plugin_lexers_are_installed():
    """Pygments' own lookup also asks plugin lexers; the review's does not. With none
    installed (the locked requirements carry none) the two agree on every name."""
    assert list(find_plugin_lexers()) == []


@pytest.mark.parametrize("chunk", range(4))
def test_the_lookup_agrees_with_pygments(chunk):
    names = sorted(set(names_from_patterns() + COMMON))
    part = names[chunk::4]
    assert len(part) > 200
    disagree = [(n, classify.lexer_class_for(n), find_lexer_class_for_filename(n))
                for n in part
                if classify.lexer_class_for(n) is not find_lexer_class_for_filename(n)]
    assert disagree == []


def test_language_of_names_the_language_and_its_alias():
    assert classify.language_of("users.py") == ("Python", "python")
    assert classify.language_of("users.ts") == ("TypeScript", "typescript")
    assert classify.language_of("no_extension_at_all") == ("", "text")
