from flask import Flask, request
from lxml import etree

app = Flask(__name__)
TREE = etree.parse("users.xml")


@app.route("/user")
def user():
    name = request.args["name"]
    # ruleid: py-taint-xpath-injection
    nodes = TREE.xpath(f"//user[@name='{name}']")
    # ok: py-taint-xpath-injection
    same = TREE.xpath("//user[@name=$n]", n=name)
    # ok: py-taint-xpath-injection
    admins = TREE.xpath("//user[@role='admin']")
    return str(len(nodes) + len(same) + len(admins))


def django_view(request):
    # ruleid: py-taint-xpath-injection
    return TREE.findall(".//item[@id='" + request.GET["id"] + "']")
