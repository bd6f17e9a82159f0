import ldap
from ldap.filter import escape_filter_chars
from flask import Flask, request

app = Flask(__name__)
BASE_DN = "ou=people,dc=example,dc=com"


@app.route("/people")
def people():
    uid = request.args["uid"]
    conn = ldap.initialize("ldaps://ldap.example.com")
    # ruleid: py-taint-ldap-injection
    found = conn.search_s(BASE_DN, ldap.SCOPE_SUBTREE, "(uid=" + uid + ")")
    # ok: py-taint-ldap-injection
    safe = conn.search_s(BASE_DN, ldap.SCOPE_SUBTREE, "(uid=%s)" % escape_filter_chars(uid))
    return str(found + safe)


def django_view(request):
    conn = get_ldap3_connection()
    # ruleid: py-taint-ldap-injection
    conn.search(BASE_DN, f"(mail={request.GET['mail']})")
    # ok: py-taint-ldap-injection
    conn.search(BASE_DN, "(objectClass=person)")
    return conn.entries
