import java.io.*;

class Load {
    Object read(InputStream in) throws Exception {
        ObjectInputStream ois = new ObjectInputStream(in);
        // ruleid: java-unsafe-deserialization
        Object o = ois.readObject();
        // ok: java-unsafe-deserialization
        int n = new DataInputStream(in).readInt();
        return o;
    }
}
