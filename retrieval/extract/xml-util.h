// libxml2 for the extractors: one-time init, silence (libxml2 prints parse errors to stderr by
// default; a library must not), and a safe XML parse of a document part (no network, no DTD
// loading, no entity expansion: XXE and billion-laughs stay inert).
#pragma once

#include <libxml/parser.h>
#include <libxml/tree.h>

#include <memory>
#include <string>
#include <string_view>

namespace cacheblend {

// While alive, libxml2 reports nothing on this thread (its error handlers are thread-local).
class libxml_quiet {
public:
    libxml_quiet();
    ~libxml_quiet();
    libxml_quiet(const libxml_quiet&) = delete;
    libxml_quiet& operator=(const libxml_quiet&) = delete;

private:
    xmlGenericErrorFunc old_generic_;
    void* old_generic_ctx_;
    xmlStructuredErrorFunc old_structured_;
    void* old_structured_ctx_;
};

struct xml_doc_free {
    void operator()(xmlDoc* d) const { xmlFreeDoc(d); }
};
using xml_doc = std::unique_ptr<xmlDoc, xml_doc_free>;

// Parses `xml` (a part named `what`, e.g. "word/document.xml"). Throws error(status::invalid_arg)
// "damaged <format>: <what> is not well-formed XML (line N: message)".
xml_doc parse_xml(std::string_view xml, const std::string& format, const std::string& what);

// The element's name without its namespace prefix ("p" for w:p); "" for non-elements.
std::string_view local_name(const xmlNode* n);
// The value of the attribute whose local name is `name` ("" when absent).
std::string attribute(const xmlNode* n, const char* name);

}  // namespace cacheblend
