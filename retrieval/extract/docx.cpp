// DOCX (Office Open XML): word/document.xml from the zip (bounded, zip-entry.h), parsed by
// libxml2; each w:p is a paragraph, a paragraph styled Heading*/Title (or with an outline level)
// is a heading. Deleted text (w:delText) and field codes (w:instrText) are not text.
#include <cctype>

#include "core/util/error.h"
#include "retrieval/extract/extractors.h"
#include "retrieval/extract/xml-util.h"
#include "retrieval/extract/zip-entry.h"

namespace cacheblend {

namespace {

bool starts_with_ci(const std::string& s, const char* p) {
    size_t i = 0;
    for (; p[i]; ++i) {
        if (i >= s.size() || std::tolower(static_cast<unsigned char>(s[i])) != p[i]) return false;
    }
    return true;
}

// Text of the runs under n (recursively: hyperlinks, smart tags and fields hold runs too).
void run_text(const xmlNode* n, std::string& out) {
    for (const xmlNode* c = n->children; c; c = c->next) {
        const std::string_view name = local_name(c);
        if (name == "t") {
            xmlChar* s = xmlNodeGetContent(c);
            if (s) out += reinterpret_cast<const char*>(s);
            xmlFree(s);
        } else if (name == "tab") {
            out += '\t';
        } else if (name == "br" || name == "cr") {
            out += '\n';
        } else if (name == "pPr" || name == "rPr" || name == "delText" || name == "instrText") {
            continue;  // properties, deleted text and field codes are not text
        } else if (!name.empty()) {
            run_text(c, out);
        }
    }
}

bool is_heading(const xmlNode* p) {
    for (const xmlNode* c = p->children; c; c = c->next) {
        if (local_name(c) != "pPr") continue;
        for (const xmlNode* q = c->children; q; q = q->next) {
            const std::string_view name = local_name(q);
            if (name == "outlineLvl") return true;
            if (name == "pStyle") {
                const std::string style = attribute(q, "val");
                return starts_with_ci(style, "heading") || starts_with_ci(style, "title");
            }
        }
    }
    return false;
}

void walk(const xmlNode* n, text_builder& b, const extract_limits& lim) {
    for (const xmlNode* c = n->children; c; c = c->next) {
        const std::string_view name = local_name(c);
        if (name == "p") {
            std::string text;
            run_text(c, text);
            if (is_heading(c)) {
                b.heading(text);
            } else {
                b.paragraph(text);
            }
        } else if (!name.empty()) {
            walk(c, b, lim);  // body, tables, cells, text boxes, content controls
        }
    }
}

}  // namespace

extracted_text extract_docx(std::string_view source, const extract_limits& lim) {
    const std::string xml = read_zip_entry(source, "word/document.xml", "docx", lim.max_bytes);
    if (lim.check) lim.check();
    const xml_doc doc = parse_xml(xml, "docx", "word/document.xml");
    text_builder b;
    walk(xmlDocGetRootElement(doc.get()), b, lim);
    return b.finish(false);
}

}  // namespace cacheblend
