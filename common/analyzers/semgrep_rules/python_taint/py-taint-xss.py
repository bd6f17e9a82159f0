from django.http import HttpResponse
from fastapi import FastAPI
from fastapi.responses import HTMLResponse
from flask import Flask, render_template, render_template_string, request
from markupsafe import escape

app = Flask(__name__)
api = FastAPI()


@app.route("/hello")
def hello():
    name = request.args.get("name", "")
    # ruleid: py-taint-xss
    return f"<h1>Hello {name}</h1>"


@app.route("/card")
def card():
    # ruleid: py-taint-xss
    return render_template_string("<p>" + request.args["title"] + "</p>")


@app.route("/safe")
def safe():
    name = request.args.get("name", "")
    # ok: py-taint-xss
    return f"<h1>Hello {escape(name)}</h1>"


@app.route("/page")
def page():
    # ok: py-taint-xss
    return render_template("page.html", name=request.args.get("name"))


def django_view(request):
    # ruleid: py-taint-xss
    return HttpResponse("<p>" + request.GET["q"] + "</p>")


@api.get("/fa")
def fa(q: str):
    # ruleid: py-taint-xss
    return HTMLResponse(f"<b>{q}</b>")
