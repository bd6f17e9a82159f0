using System.Xml;

public class Importer
{
    public string Load(string xml)
    {
        // ruleid: cs-xxe
        var doc = new XmlDocument { XmlResolver = new XmlUrlResolver() };
        doc.LoadXml(xml);
        var other = new XmlDocument();
        // ruleid: cs-xxe
        other.XmlResolver = new XmlUrlResolver();
        // ruleid: cs-xxe
        var settings = new XmlReaderSettings { DtdProcessing = DtdProcessing.Parse };
        var legacy = new XmlReaderSettings();
        // ruleid: cs-xxe
        legacy.DtdProcessing = DtdProcessing.Parse;
        var reader = new XmlTextReader(new System.IO.StringReader(xml));
        // ruleid: cs-xxe
        reader.ProhibitDtd = false;
        // ok: cs-xxe
        var safe = new XmlReaderSettings { DtdProcessing = DtdProcessing.Prohibit, XmlResolver = null };
        // ok: cs-xxe
        var plain = new XmlDocument { XmlResolver = null };
        // ok: cs-xxe
        legacy.DtdProcessing = DtdProcessing.Ignore;
        return doc.DocumentElement?.Name;
    }
}
