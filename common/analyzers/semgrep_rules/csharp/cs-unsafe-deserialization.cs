public class CartStore
{
    public object Load(Stream body, string json)
    {
        // ruleid: cs-unsafe-deserialization
        var formatter = new BinaryFormatter();
        // ruleid: cs-unsafe-deserialization
        var settings = new JsonSerializerSettings { TypeNameHandling = TypeNameHandling.All };
        // ok: cs-unsafe-deserialization
        var safe = new JsonSerializerSettings { TypeNameHandling = TypeNameHandling.None };
        // ok: cs-unsafe-deserialization
        var cart = System.Text.Json.JsonSerializer.Deserialize<Cart>(json);
        return formatter.Deserialize(body);
    }
}
