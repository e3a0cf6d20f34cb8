// ODT (OpenDocument text): content.xml from the zip (bounded, zip-entry.h), parsed by libxml2;
// text:p is a paragraph, text:h a heading; text:s, text:tab and text:line-break are whitespace.
// Annotations (comments) are not the document's text.
#include <cstdlib>

#include "core/util/error.h"
#include "retrieval/extract/extractors.h"
#include "retrieval/extract/xml-util.h"
#include "retrieval/extract/zip-entry.h"

namespace cacheblend {

namespace {

void inline_text(const xmlNode* n, std::string& out) {
    for (const xmlNode* c = n->children; c; c = c->next) {
        if (c->type == XML_TEXT_NODE && c->content) {
            out += reinterpret_cast<const char*>(c->content);
            continue;
        }
        const std::string_view name = local_name(c);
        if (name == "s") {
            // text:c spaces; bounded so a hostile count cannot blow up the text
            const long k = std::strtol(attribute(c, "c").c_str(), nullptr, 10);
            out.append(static_cast<size_t>(k > 1 && k < 1000 ? k : 1), ' ');
        } else if (name == "tab") {
            out += '\t';
        } else if (name == "line-break") {
            out += '\n';
        } else if (name == "annotation" || name == "note-citation") {
            continue;
        } else if (!name.empty()) {
            inline_text(c, out);  // spans, links, bookmarks' contents
        }
    }
}

void walk(const xmlNode* n, text_builder& b) {
    for (const xmlNode* c = n->children; c; c = c->next) {
        const std::string_view name = local_name(c);
        if (name == "p" || name == "h") {
            std::string text;
            inline_text(c, text);
            if (name == "h") {
                b.heading(text);
            } else {
                b.paragraph(text);
            }
        } else if (name == "annotation") {
            continue;
        } else if (!name.empty()) {
            walk(c, b);  // body, sections, lists, tables, frames
        }
    }
}

}  // namespace

extracted_text extract_odt(std::string_view source, const extract_limits& lim) {
    const std::string xml = read_zip_entry(source, "content.xml", "odt", lim.max_bytes);
    if (lim.check) lim.check();
    const xml_doc doc = parse_xml(xml, "odt", "content.xml");
    text_builder b;
    walk(xmlDocGetRootElement(doc.get()), b);
    return b.finish(false);
}

}  // namespace cacheblend
