// Documents the extractor and ingest tests build themselves (no binaries in the repository): a
// PDF written as PDF syntax by hand, DOCX and ODT as zip files of XML (libzip).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace cbltest {

// A PDF with one page per entry, each page's lines drawn in Helvetica. encrypted: a Standard
// security handler whose user password is not empty (readers need a password).
std::string make_pdf(const std::vector<std::vector<std::string>>& pages, bool encrypted = false);

// A zip archive holding these (name, bytes) members, deflated (empty when built without libzip).
std::string make_zip(const std::vector<std::pair<std::string, std::string>>& members);

// One paragraph of a word-processing document; heading_level > 0 makes it a heading.
struct para {
    std::string text;
    int heading_level = 0;
};
std::string make_docx(const std::vector<para>& paras);
std::string make_odt(const std::vector<para>& paras);

// XML-escapes & < > ".
std::string xml_escape(const std::string& s);

}  // namespace cbltest
