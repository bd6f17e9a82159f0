const express = require("express");
const ldap = require("ldapjs");

const app = express();
const client = ldap.createClient({ url: "ldaps://ldap.example.com" });

app.get("/people", (req, res) => {
  // ruleid: js-taint-ldap-injection
  client.search("ou=people,dc=example,dc=com", { filter: `(uid=${req.query.uid})`, scope: "sub" }, (err, found) => {
    res.json({ ok: !err });
  });
});

app.get("/people-safe", (req, res) => {
  const filter = new ldap.EqualityFilter({ attribute: "uid", value: req.query.uid });
  // ok: js-taint-ldap-injection
  client.search("ou=people,dc=example,dc=com", { filter, scope: "sub" }, (err) => res.json({ ok: !err }));
  // ok: js-taint-ldap-injection
  client.search("ou=people,dc=example,dc=com", { filter: "(objectClass=person)" }, () => {});
});
