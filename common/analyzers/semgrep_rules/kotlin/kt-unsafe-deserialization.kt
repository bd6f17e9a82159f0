class CartStore {
    fun load(bytes: ByteArray, mapper: ObjectMapper): Any? {
        // ruleid: kt-unsafe-deserialization
        val cart = ObjectInputStream(ByteArrayInputStream(bytes)).readObject()
        // ruleid: kt-unsafe-deserialization
        mapper.enableDefaultTyping()
        // ok: kt-unsafe-deserialization
        val data = mapper.readValue(bytes, Cart::class.java)
        return listOf(cart, data)
    }
}
