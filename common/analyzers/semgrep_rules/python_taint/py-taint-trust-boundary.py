from flask import Flask, request, session

app = Flask(__name__)
ALLOWED_LANGUAGES = {"en", "fr", "de"}


@app.route("/prefs", methods=["POST"])
def prefs():
    # ruleid: py-taint-trust-boundary
    session["role"] = request.form["role"]
    lang = request.form.get("lang", "en")
    if lang in ALLOWED_LANGUAGES:
        # ok: py-taint-trust-boundary
        session["lang"] = lang
    # ok: py-taint-trust-boundary
    session["visits"] = session.get("visits", 0) + 1
    return "ok"


def django_view(request):
    # ruleid: py-taint-trust-boundary
    request.session["user_id"] = request.GET["uid"]
