from django.http import HttpResponseRedirect
from django.utils.http import url_has_allowed_host_and_scheme
from flask import Flask, redirect, request, url_for

app = Flask(__name__)


@app.route("/login/done")
def done():
    # ruleid: py-taint-open-redirect
    return redirect(request.args.get("next", "/"))


@app.route("/go")
def go():
    # ok: py-taint-open-redirect
    return redirect(url_for("profile", tab=request.args.get("tab")))


def django_done(request):
    nxt = request.GET.get("next", "/")
    if url_has_allowed_host_and_scheme(nxt, allowed_hosts={request.get_host()}):
        # ok: py-taint-open-redirect
        return HttpResponseRedirect(nxt)
    # ruleid: py-taint-open-redirect
    return HttpResponseRedirect(nxt)


def after_login(request):
    target = request.GET.get("next", "/")
    if not url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}):
        target = "/"
    # ok: py-taint-open-redirect
    return HttpResponseRedirect(target)


def after_logout(request):
    target = request.GET.get("next", "/")
    if url_has_allowed_host_and_scheme("/", allowed_hosts=None):
        target = "/"
    # ruleid: py-taint-open-redirect
    return HttpResponseRedirect(target)
