import javax.xml.XMLConstants;
import javax.xml.parsers.DocumentBuilder;
import javax.xml.parsers.DocumentBuilderFactory;
import javax.xml.parsers.SAXParserFactory;
import javax.xml.stream.XMLInputFactory;

class Importer {
    Object parse(java.io.InputStream in) throws Exception {
        // ruleid: java-xxe
        Object doc = DocumentBuilderFactory.newInstance().newDocumentBuilder().parse(in);
        DocumentBuilderFactory dbf = DocumentBuilderFactory.newInstance();
        dbf.setNamespaceAware(true);
        // ruleid: java-xxe
        DocumentBuilder builder = dbf.newDocumentBuilder();
        SAXParserFactory spf = SAXParserFactory.newInstance();
        // ruleid: java-xxe
        spf.newSAXParser().parse(in, new org.xml.sax.helpers.DefaultHandler());
        XMLInputFactory xif = XMLInputFactory.newFactory();
        // ruleid: java-xxe
        xif.setProperty(XMLInputFactory.IS_SUPPORTING_EXTERNAL_ENTITIES, true);
        // ruleid: java-xxe
        Object stream = xif.createXMLStreamReader(in);
        return new Object[] {doc, builder, stream};
    }

    Object hardened(java.io.InputStream in) throws Exception {
        DocumentBuilderFactory dbf = DocumentBuilderFactory.newInstance();
        dbf.setFeature("http://apache.org/xml/features/disallow-doctype-decl", true);
        // ok: java-xxe
        DocumentBuilder builder = dbf.newDocumentBuilder();
        XMLInputFactory xif = XMLInputFactory.newInstance();
        xif.setProperty(XMLInputFactory.SUPPORT_DTD, false);
        // ok: java-xxe
        Object stream = xif.createXMLStreamReader(in);
        SAXParserFactory spf = SAXParserFactory.newInstance();
        spf.setFeature("http://xml.org/sax/features/external-general-entities", false);
        spf.setFeature("http://xml.org/sax/features/external-parameter-entities", false);
        // ok: java-xxe
        spf.newSAXParser();
        return new Object[] {builder.parse(in), stream};
    }
}
