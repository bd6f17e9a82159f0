from urllib.parse import urlparse

import httpx
import requests
from fastapi import FastAPI
from flask import Flask, abort, request

app = Flask(__name__)
api = FastAPI()
ALLOWED_HOSTS = {"api.example.com"}


@app.route("/preview")
def preview():
    url = request.args["url"]
    # ruleid: py-taint-ssrf
    return requests.get(url, timeout=5).text


@app.route("/allowed")
def allowed():
    url = request.args["url"]
    if urlparse(url).hostname in ALLOWED_HOSTS:
        # ok: py-taint-ssrf
        return requests.get(url, timeout=5).text
    # ok: py-taint-ssrf
    return requests.get("https://api.example.com/search", params={"q": url}, timeout=5).text


@api.get("/fetch")
async def fetch(target: str):
    # ruleid: py-taint-ssrf
    return requests.post(f"http://{target}/hook", timeout=5).status_code


@app.post("/hooks/deliver")
async def deliver(payload: dict):
    async with httpx.AsyncClient(timeout=5) as client:
        # ruleid: py-taint-ssrf
        r = await client.post(payload["callback"], json={"ok": True})
        # ok: py-taint-ssrf
        s = await client.get("https://status.example.com/ping")
    return {"status": r.status_code + s.status_code}


@app.get("/mirror")
def mirror(src: str):
    session = requests.Session()
    # ruleid: py-taint-ssrf
    body = session.get(src).text
    with httpx.Client() as http:
        # ruleid: py-taint-ssrf
        head = http.request("HEAD", src)
        # ok: py-taint-ssrf
        docs = http.get("https://docs.example.com/", params={"q": src})
    return body + str(head) + docs.text


ALLOWED_HOSTS = {"hooks.slack.com"}


@app.post("/webhooks/send")
def send_webhook():
    target = request.get_json(force=True)["target"]
    if urlparse(target).hostname not in ALLOWED_HOSTS:
        abort(400)
    # ok: py-taint-ssrf
    return requests.post(target, json={"text": "hi"}, timeout=5).text


@app.post("/webhooks/send-unchecked")
def send_unchecked():
    target = request.get_json(force=True)["target"]
    if urlparse(target).hostname not in ALLOWED_HOSTS:
        app.logger.warning("unknown host %s", target)
    # ruleid: py-taint-ssrf
    return requests.post(target, json={"text": "hi"}, timeout=5).text
