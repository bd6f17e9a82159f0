post "/upload" do
  # ruleid: rb-xxe
  doc = Nokogiri::XML(request.body.read) { |config| config.strict.noent }
  # ruleid: rb-xxe
  feed = Nokogiri::XML(params[:feed], nil, "UTF-8", Nokogiri::XML::ParseOptions::NOENT | Nokogiri::XML::ParseOptions::DTDLOAD)
  # ruleid: rb-xxe
  LibXML::XML.default_substitute_entities = true
  # ruleid: rb-xxe
  parsed = LibXML::XML::Parser.string(xml, options: LibXML::XML::Parser::Options::NOENT).parse
  cfg = Nokogiri::XML(File.read(path)) do |c|
    # ruleid: rb-xxe
    c.dtdload
  end
  # ok: rb-xxe
  plain = Nokogiri::XML(request.body.read)
  # ok: rb-xxe
  strict = Nokogiri::XML(params[:feed]) { |config| config.strict.nonet }
  # ok: rb-xxe
  opts = Nokogiri::XML(params[:feed], nil, "UTF-8", Nokogiri::XML::ParseOptions::STRICT)
  # ok: rb-xxe
  LibXML::XML.default_substitute_entities = false
end

class FeedReader
  PARSE_OPTIONS = Nokogiri::XML::ParseOptions::DEFAULT_XML | Nokogiri::XML::ParseOptions::NOENT
  SAFE_OPTIONS = Nokogiri::XML::ParseOptions::STRICT | Nokogiri::XML::ParseOptions::NONET

  def read(io)
    # ruleid: rb-xxe
    doc = Nokogiri::XML(io.read, nil, "UTF-8", PARSE_OPTIONS)
    # ok: rb-xxe
    safe = Nokogiri::XML(io.read, nil, "UTF-8", SAFE_OPTIONS)
    [doc, safe]
  end
end
