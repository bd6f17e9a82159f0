import os

from flask import Flask, request, send_file, send_from_directory
from werkzeug.utils import secure_filename

app = Flask(__name__)
BASE = "/srv/reports"


@app.route("/report")
def report():
    name = request.args.get("name")
    # ruleid: py-taint-path-traversal
    return send_file(os.path.join(BASE, name))


@app.route("/raw/<path:doc>")
def raw(doc):
    # ruleid: py-taint-path-traversal
    with open(os.path.join("/srv/docs", doc)) as fh:
        return fh.read()


@app.route("/safe")
def safe():
    name = request.args.get("name")
    # ok: py-taint-path-traversal
    with open(os.path.join(BASE, os.path.basename(name))) as fh:
        body = fh.read()
    # ok: py-taint-path-traversal
    with open(os.path.join(BASE, secure_filename(name))) as fh:
        body += fh.read()
    # ok: py-taint-path-traversal
    with open(os.path.join(BASE, "index.txt")) as fh:
        body += fh.read()
    return body + str(send_from_directory(BASE, name))


def django_view(request):
    # ruleid: py-taint-path-traversal
    os.remove("/tmp/uploads/" + request.GET["file"])
