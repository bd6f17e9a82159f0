from flask import Flask, request
from lxml import etree

app = Flask(__name__)


@app.route("/import", methods=["POST"])
def import_xml():
    # ruleid: py-taint-xxe
    doc = etree.fromstring(request.data)
    return doc.tag


@app.route("/import-safe", methods=["POST"])
def import_safe():
    parser = etree.XMLParser(resolve_entities=False, no_network=True)
    # ok: py-taint-xxe
    doc = etree.fromstring(request.data, parser)
    return doc.tag


@app.route("/import-defused", methods=["POST"])
def import_defused():
    import defusedxml.ElementTree

    # ok: py-taint-xxe
    doc = defusedxml.ElementTree.fromstring(request.data)
    # ok: py-taint-xxe
    local = etree.fromstring(b"<a/>")
    return doc.tag + local.tag


def django_view(request):
    # ruleid: py-taint-xxe
    return etree.XML(request.body).tag
