from urllib.parse import urlparse

import requests
from fastapi import FastAPI
from flask import Flask, request

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
