// libxml2 helpers for the extractors (xml-util.h).
#include "retrieval/extract/xml-util.h"

#include <libxml/xmlerror.h>

#include <climits>
#include <cstring>
#include <mutex>

#include "core/util/error.h"

namespace cacheblend {

namespace {

void quiet_generic(void*, const char*, ...) {}
void quiet_structured(void*, xmlErrorPtr) {}

// xmlInitParser must run once before threads use libxml2 at the same time.
void init_once() {
    static std::once_flag once;
    std::call_once(once, [] { xmlInitParser(); });
}

}  // namespace

libxml_quiet::libxml_quiet() {
    init_once();
    old_generic_ = xmlGenericError;
    old_generic_ctx_ = xmlGenericErrorContext;
    old_structured_ = xmlStructuredError;
    old_structured_ctx_ = xmlStructuredErrorContext;
    xmlSetGenericErrorFunc(nullptr, quiet_generic);
    xmlSetStructuredErrorFunc(nullptr, quiet_structured);
}

libxml_quiet::~libxml_quiet() {
    xmlSetGenericErrorFunc(old_generic_ctx_, old_generic_);
    xmlSetStructuredErrorFunc(old_structured_ctx_, old_structured_);
}

xml_doc parse_xml(std::string_view xml, const std::string& format, const std::string& what) {
    const libxml_quiet quiet;
    if (xml.size() > INT_MAX) {
        throw error(status::invalid_arg, "damaged " + format + ": " + what + " is too large");
    }
    const xmlParserCtxtPtr ctxt = xmlNewParserCtxt();
    if (!ctxt) throw error(status::nomem, "libxml2: cannot create a parser");
    struct ctxt_free {
        xmlParserCtxtPtr c;
        ~ctxt_free() { xmlFreeParserCtxt(c); }
    } f{ctxt};
    xml_doc doc(xmlCtxtReadMemory(ctxt, xml.data(), static_cast<int>(xml.size()), what.c_str(),
                                  nullptr,
                                  XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING |
                                      XML_PARSE_NOCDATA));
    if (!doc || !xmlDocGetRootElement(doc.get())) {
        const xmlError* e = xmlCtxtGetLastError(ctxt);
        std::string msg = e && e->message ? e->message : "no root element";
        while (!msg.empty() && msg.back() == '\n') msg.pop_back();
        throw error(status::invalid_arg,
                    fmt("damaged %s: %s is not well-formed XML (line %d: %s)", format.c_str(),
                        what.c_str(), e ? e->line : 0, msg.c_str()));
    }
    return doc;
}

std::string_view local_name(const xmlNode* n) {
    if (!n || n->type != XML_ELEMENT_NODE || !n->name) return {};
    return reinterpret_cast<const char*>(n->name);
}

std::string attribute(const xmlNode* n, const char* name) {
    for (const xmlAttr* a = n ? n->properties : nullptr; a; a = a->next) {
        if (!a->name || std::strcmp(reinterpret_cast<const char*>(a->name), name) != 0) continue;
        xmlChar* v = xmlNodeListGetString(n->doc, a->children, 1);
        std::string out = v ? reinterpret_cast<const char*>(v) : "";
        xmlFree(v);
        return out;
    }
    return {};
}

}  // namespace cacheblend
