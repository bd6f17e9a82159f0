function show(el, params, user) {
  // ruleid: js-html-injection
  el.innerHTML = params.get("q");
  // ruleid: js-html-injection
  el.innerHTML = `<b>${user.name}</b>`;
  // ruleid: js-html-injection
  document.write("<p>" + location.hash + "</p>");
  // ok: js-html-injection
  el.innerHTML = "<b>static</b>";
  // ok: js-html-injection
  el.textContent = params.get("q");
  // ok: js-html-injection
  el.innerHTML = DOMPurify.sanitize(params.get("q"));
  // ok: js-html-injection
  el.innerHTML = "";
  return (
    // ruleid: js-html-injection
    <div dangerouslySetInnerHTML={{ __html: user.bio }} />
  );
}
