const crypto = require("crypto");

function store(password, user) {
  // ruleid: js-weak-crypto
  const digest = crypto.createHash("md5").update(password).digest("hex");
  // ruleid: js-weak-crypto
  const cipher = crypto.createCipheriv("des-cbc", key, iv);
  // ruleid: js-weak-crypto
  const resetToken = Math.random().toString(36).slice(2);
  // ok: js-weak-crypto
  const good = crypto.createHash("sha256").update(password).digest("hex");
  // ok: js-weak-crypto
  const jitter = Math.random() * 100;
  // ok: js-weak-crypto
  const token = crypto.randomBytes(32).toString("hex");
  return [digest, cipher, resetToken, good, jitter, token, user];
}

function makeSessionId() {
  // ruleid: js-weak-crypto
  return Math.random().toString(16);
}
