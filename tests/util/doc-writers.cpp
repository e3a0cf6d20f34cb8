#include "util/doc-writers.h"

#include <cstdio>

#if CBL_HAVE_LIBZIP
#include <zip.h>
#endif

namespace cbltest {

namespace {

std::string pdf_string(const std::string& s) {
    std::string out = "(";
    for (char c : s) {
        if (c == '(' || c == ')' || c == '\\') out += '\\';
        out += c;
    }
    return out + ")";
}

}  // namespace

std::string make_pdf(const std::vector<std::vector<std::string>>& pages, bool encrypted) {
    // Objects: 1 catalog, 2 pages, 3 font, then per page a page and its content stream, then
    // (encrypted) the encryption dictionary. The xref table gets every object's byte offset.
    std::vector<std::string> objs;
    std::string kids;
    const size_t n = pages.size();
    for (size_t i = 0; i < n; ++i) kids += std::to_string(4 + 2 * i) + " 0 R ";
    objs.push_back("<< /Type /Catalog /Pages 2 0 R >>");
    objs.push_back("<< /Type /Pages /Kids [" + kids + "] /Count " + std::to_string(n) + " >>");
    objs.push_back("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>");
    for (size_t i = 0; i < n; ++i) {
        objs.push_back(
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font "
            "<< /F1 3 0 R >> >> /Contents " +
            std::to_string(5 + 2 * i) + " 0 R >>");
        std::string content = "BT /F1 12 Tf 72 720 Td 14 TL\n";
        for (const std::string& line : pages[i]) content += pdf_string(line) + " Tj T*\n";
        content += "ET\n";
        objs.push_back("<< /Length " + std::to_string(content.size()) + " >>\nstream\n" + content +
                       "endstream");
    }
    if (encrypted) {
        const std::string h32(64, 'A');  // 32 bytes that match no password
        objs.push_back("<< /Filter /Standard /V 1 /R 2 /O <" + h32 + "> /U <" + h32 + "> /P -4 >>");
    }
    std::string out = "%PDF-1.4\n";
    std::vector<size_t> offsets;
    for (size_t i = 0; i < objs.size(); ++i) {
        offsets.push_back(out.size());
        out += std::to_string(i + 1) + " 0 obj\n" + objs[i] + "\nendobj\n";
    }
    const size_t xref = out.size();
    out += "xref\n0 " + std::to_string(objs.size() + 1) + "\n0000000000 65535 f \n";
    for (size_t off : offsets) {
        char line[32];
        std::snprintf(line, sizeof line, "%010zu 00000 n \n", off);
        out += line;
    }
    out += "trailer\n<< /Size " + std::to_string(objs.size() + 1) + " /Root 1 0 R";
    if (encrypted) {
        out += " /Encrypt " + std::to_string(objs.size()) +
               " 0 R /ID [<0123456789ABCDEF0123456789ABCDEF> <0123456789ABCDEF0123456789ABCDEF>]";
    }
    out += " >>\nstartxref\n" + std::to_string(xref) + "\n%%EOF\n";
    return out;
}

std::string make_zip(const std::vector<std::pair<std::string, std::string>>& members) {
#if CBL_HAVE_LIBZIP
    zip_error_t ze;
    zip_error_init(&ze);
    zip_source_t* buf = zip_source_buffer_create(nullptr, 0, 0, &ze);
    zip_t* z = zip_open_from_source(buf, ZIP_TRUNCATE, &ze);
    zip_error_fini(&ze);
    if (!z) {
        zip_source_free(buf);
        return {};
    }
    zip_source_keep(buf);  // read the archive back after zip_close
    for (const auto& [name, data] : members) {
        zip_source_t* s = zip_source_buffer(z, data.data(), data.size(), 0);
        const zip_int64_t at = zip_file_add(z, name.c_str(), s, ZIP_FL_OVERWRITE);
        // ODF wants its mimetype member stored, not deflated (content sniffers read it raw).
        if (at >= 0 && name == "mimetype") {
            zip_set_file_compression(z, static_cast<zip_uint64_t>(at), ZIP_CM_STORE, 0);
        }
    }
    std::string out;
    if (zip_close(z) == 0 && zip_source_open(buf) == 0) {
        char chunk[65536];
        zip_int64_t n;
        while ((n = zip_source_read(buf, chunk, sizeof chunk)) > 0) {
            out.append(chunk, static_cast<size_t>(n));
        }
        zip_source_close(buf);
    }
    zip_source_free(buf);
    return out;
#else
    (void)members;
    return {};
#endif
}

std::string xml_escape(const std::string& s) {
    std::string out;
    for (char c : s) {
        switch (c) {
            case '&': out += "&amp;"; break;
            case '<': out += "&lt;"; break;
            case '>': out += "&gt;"; break;
            case '"': out += "&quot;"; break;
            default: out += c;
        }
    }
    return out;
}

std::string make_docx(const std::vector<para>& paras) {
    std::string body;
    for (const para& p : paras) {
        body += "<w:p>";
        if (p.heading_level > 0) {
            body += "<w:pPr><w:pStyle w:val=\"Heading" + std::to_string(p.heading_level) +
                    "\"/></w:pPr>";
        }
        body += "<w:r><w:t xml:space=\"preserve\">" + xml_escape(p.text) + "</w:t></w:r></w:p>";
    }
    const std::string doc =
        "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>\n"
        "<w:document xmlns:w=\"http://schemas.openxmlformats.org/wordprocessingml/2006/main\">"
        "<w:body>" +
        body + "</w:body></w:document>";
    const std::string types =
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>"
        "<Types xmlns=\"http://schemas.openxmlformats.org/package/2006/content-types\">"
        "<Default Extension=\"xml\" ContentType=\"application/xml\"/>"
        "<Override PartName=\"/word/document.xml\" ContentType=\"application/"
        "vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml\"/></Types>";
    return make_zip({{"[Content_Types].xml", types}, {"word/document.xml", doc}});
}

std::string make_odt(const std::vector<para>& paras) {
    std::string body;
    for (const para& p : paras) {
        if (p.heading_level > 0) {
            body += "<text:h text:outline-level=\"" + std::to_string(p.heading_level) + "\">" +
                    xml_escape(p.text) + "</text:h>";
        } else {
            body += "<text:p>" + xml_escape(p.text) + "</text:p>";
        }
    }
    const std::string content =
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>"
        "<office:document-content "
        "xmlns:office=\"urn:oasis:names:tc:opendocument:xmlns:office:1.0\" "
        "xmlns:text=\"urn:oasis:names:tc:opendocument:xmlns:text:1.0\" office:version=\"1.2\">"
        "<office:body><office:text>" +
        body +
        "</office:text></office:body>"
        "</office:document-content>";
    return make_zip(
        {{"mimetype", "application/vnd.oasis.opendocument.text"}, {"content.xml", content}});
}

}  // namespace cbltest
