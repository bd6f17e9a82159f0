<?php
$xml = file_get_contents("php://input");
// ruleid: php-xxe
$a = simplexml_load_string($xml, "SimpleXMLElement", LIBXML_NOENT);
// ruleid: php-xxe
$b = simplexml_load_file($_FILES["doc"]["tmp_name"], null, LIBXML_DTDLOAD | LIBXML_NOENT);
$dom = new DOMDocument();
// ruleid: php-xxe
$dom->loadXML($xml, LIBXML_NOENT | LIBXML_NOCDATA);
// ruleid: php-xxe
$dom->substituteEntities = true;
// ruleid: php-xxe
libxml_disable_entity_loader(false);
$reader = new XMLReader();
// ruleid: php-xxe
$reader->setParserProperty(XMLReader::SUBST_ENTITIES, true);
// ok: php-xxe
$c = simplexml_load_string($xml);
// ok: php-xxe
$d = simplexml_load_string($xml, "SimpleXMLElement", LIBXML_NONET | LIBXML_NOCDATA);
// ok: php-xxe
$dom->loadXML($xml);
// ok: php-xxe
$dom->substituteEntities = false;
// ok: php-xxe
libxml_disable_entity_loader(true);
