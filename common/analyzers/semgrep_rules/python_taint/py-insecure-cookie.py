from flask import Flask, make_response

app = Flask(__name__)
# ruleid: py-insecure-cookie
app.config["SESSION_COOKIE_SECURE"] = False


@app.route("/login", methods=["POST"])
def login():
    resp = make_response("ok")
    # ruleid: py-insecure-cookie
    resp.set_cookie("session_token", new_token())
    # ruleid: py-insecure-cookie
    resp.set_cookie("auth", new_token(), httponly=True)
    # ok: py-insecure-cookie
    resp.set_cookie("session_token", new_token(), secure=True, httponly=True, samesite="Lax")
    # ok: py-insecure-cookie
    resp.set_cookie("theme", "dark")
    return resp
