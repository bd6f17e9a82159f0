const serialize = require("node-serialize");
const yaml = require("js-yaml");

function read(req) {
  // ruleid: js-unsafe-deserialization
  const a = serialize.unserialize(req.cookies.profile);
  // ruleid: js-unsafe-deserialization
  const b = yaml.load(req.body, { schema: yaml.DEFAULT_FULL_SCHEMA });
  // ruleid: js-unsafe-deserialization
  const c = yaml.unsafeLoad(req.body);
  // ok: js-unsafe-deserialization
  const d = yaml.load(req.body);
  // ok: js-unsafe-deserialization
  const e = JSON.parse(req.body);
  // ok: js-unsafe-deserialization
  const f = serialize.serialize({ a: 1 });
  return [a, b, c, d, e, f];
}
