export function calc(input: string, name: string) {
  // ruleid: js-eval-injection
  const value = eval(input);
  // ruleid: js-eval-injection
  const f = new Function("a", "return a + " + input);
  // ruleid: js-eval-injection
  setTimeout("greet('" + name + "')", 10);
  // ok: js-eval-injection
  setTimeout(() => greet(name), 10);
  // ok: js-eval-injection
  const parsed = JSON.parse(input);
  // ok: js-eval-injection
  const two = eval("1 + 1");
  return [value, f, parsed, two];
}
