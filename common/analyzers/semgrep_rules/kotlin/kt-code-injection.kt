import javax.script.ScriptEngineManager

class Calc {
    fun run(expr: String, className: String): Any? {
        val engine = ScriptEngineManager().getEngineByName("js")
        // ruleid: kt-code-injection
        val value = engine.eval(expr)
        // ruleid: kt-code-injection
        val parsed = SpelExpressionParser().parseExpression(expr)
        // ok: kt-code-injection
        val two = engine.eval("1 + 1")
        // ok: kt-code-injection
        val fixed = SpelExpressionParser().parseExpression("name")
        return listOf(value, parsed, two, fixed)
    }
}
