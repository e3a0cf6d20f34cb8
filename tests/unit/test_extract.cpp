// The document extractors (retrieval/extract/) on files the tests build themselves: PDF pages,
// DOCX and ODT paragraphs and headings, HTML charsets, entities and headings, other charsets
// through iconv, content sniffing, and the damaged inputs that must end in a clear error (never a
// crash or a hang): corrupt, truncated and encrypted PDFs, a zip bomb, a zip that is not one.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "core/util/error.h"
#include "retrieval/chunker.h"
#include "retrieval/extract/extract.h"
#include "retrieval/extract/sniff.h"
#include "util/doc-writers.h"
#include "util/hash-embedder.h"
#include "util/test-util.h"

using namespace cacheblend;
using cbltest::para;

namespace {

// The message of the error extract_text throws ("" when it does not).
std::string extract_error(std::string_view src, doc_kind k, const extract_limits& lim = {}) {
    try {
        extract_text(src, k, lim);
    } catch (const error& e) {
        EXPECT_EQ(e.code(), status::invalid_arg) << e.what();
        return e.what();
    }
    return "";
}

bool contains(const std::string& s, const std::string& part) {
    return s.find(part) != std::string::npos;
}

std::string two_page_pdf() {
    return cbltest::make_pdf({{"Quarterly report for the orchard.", "Apples grew well."},
                              {"The pear harvest doubled in autumn.", "Plums stayed the same."}});
}

}  // namespace

#if CBL_HAVE_POPPLER

TEST(ExtractPdf, TextPageByPage) {
    const extracted_text ex = extract_text(two_page_pdf(), doc_kind::pdf);
    ASSERT_TRUE(ex.paged);
    ASSERT_EQ(ex.sections.size(), 2u);
    EXPECT_EQ(ex.sections[0].page, 1);
    EXPECT_EQ(ex.sections[1].page, 2);
    const size_t apples = ex.text.find("Apples grew well");
    const size_t pears = ex.text.find("pear harvest doubled");
    ASSERT_NE(apples, std::string::npos) << ex.text;
    ASSERT_NE(pears, std::string::npos) << ex.text;
    EXPECT_EQ(ex.section_at(apples)->page, 1);
    EXPECT_EQ(ex.section_at(pears)->page, 2);
    EXPECT_EQ(ex.src.size(), ex.text.size());
}

TEST(ExtractPdf, ChunksNeverCrossAPage) {
    // Tiny pages that would share one chunk without the cut.
    const extracted_text ex = extract_text(two_page_pdf(), doc_kind::pdf);
    const encode_fn enc = [](std::string_view s) { return cbltest::word_tokens(s); };
    chunker_params cp;
    cp.max_tokens = 512;
    ASSERT_EQ(chunk_text(ex.text, enc, cp).size(), 1u);  // what happens without cuts
    const auto chunks = chunk_text_within(ex.text, ex.page_starts(), enc, cp);
    ASSERT_EQ(chunks.size(), 2u);
    for (const text_chunk& c : chunks) {
        EXPECT_EQ(ex.section_at(c.begin)->page, ex.section_at(c.end - 1)->page);
    }
    EXPECT_EQ(ex.section_at(chunks[1].begin)->page, 2);
}

TEST(ExtractPdf, CorruptTruncatedAndEncryptedAreRefused) {
    EXPECT_TRUE(
        contains(extract_error("%PDF-1.4\nthis is not a pdf at all\n", doc_kind::pdf), "PDF"));
    EXPECT_TRUE(contains(extract_error("", doc_kind::pdf), "PDF"));
    EXPECT_EQ(extract_error(cbltest::make_pdf({{"secret plans"}}, true), doc_kind::pdf),
              "encrypted PDF (a password is needed to read it)");
    // Every prefix of a real PDF (a file cut short) ends in text or a clear error.
    const std::string pdf = two_page_pdf();
    for (size_t n = 0; n < pdf.size(); n += 37) {
        try {
            extract_text(std::string_view(pdf).substr(0, n), doc_kind::pdf);
        } catch (const error& e) {
            EXPECT_EQ(e.code(), status::invalid_arg) << n << ": " << e.what();
        }
    }
}

TEST(ExtractPdf, SlowDocumentsStopAtTheCheck) {
    extract_limits lim;
    int calls = 0;
    lim.check = [&] {
        if (++calls == 2) throw error(status::aborted, "too slow");
    };
    EXPECT_THROW(extract_text(two_page_pdf(), doc_kind::pdf, lim), error);
    EXPECT_EQ(calls, 2);  // checked before each page
}

#else

TEST(ExtractPdf, WithoutPopplerPdfIsUnsupported) {
    EXPECT_EQ(extract_error(two_page_pdf(), doc_kind::pdf),
              "unsupported file type (built without poppler)");
}

#endif

#if CBL_HAVE_LIBZIP

TEST(ExtractDocx, ParagraphsAndHeadings) {
    const std::string docx = cbltest::make_docx({{"Fruit handbook", 1},
                                                 {"Apples & pears are pome fruit."},
                                                 {"Storage", 2},
                                                 {"Keep them cool and dry."}});
    const extracted_text ex = extract_text(docx, doc_kind::docx);
    EXPECT_EQ(ex.text,
              "Fruit handbook\n\nApples & pears are pome fruit.\n\nStorage\n\nKeep them cool and "
              "dry.");
    EXPECT_FALSE(ex.paged);
    EXPECT_EQ(ex.section_at(ex.text.find("Apples"))->heading, "Fruit handbook");
    EXPECT_EQ(ex.section_at(ex.text.find("Keep"))->heading, "Storage");
    EXPECT_EQ(ex.section_at(ex.text.find("Keep"))->page, 0);
}

TEST(ExtractDocx, DeletedTextAndFieldCodesAreNotText) {
    const std::string xml =
        "<w:document xmlns:w=\"http://schemas.openxmlformats.org/wordprocessingml/2006/main\">"
        "<w:body><w:p><w:r><w:t>kept</w:t></w:r><w:del><w:r><w:delText>gone</w:delText></w:r>"
        "</w:del><w:r><w:instrText>PAGEREF x</w:instrText></w:r><w:r><w:tab/><w:t>too</w:t>"
        "</w:r></w:p></w:body></w:document>";
    const extracted_text ex =
        extract_text(cbltest::make_zip({{"word/document.xml", xml}}), doc_kind::docx);
    EXPECT_EQ(ex.text, "kept too");
}

TEST(ExtractDocx, ZipBombStopsAtTheLimit) {
    // 8 MiB of XML that deflates to a few KiB; the limit is 1 MiB.
    const std::string xml =
        "<w:document xmlns:w=\"http://schemas.openxmlformats.org/wordprocessingml/2006/main\">"
        "<w:body><w:p><w:r><w:t>" +
        std::string(8 << 20, 'a') +
        "</w:t></w:r></w:p></w:body>"
        "</w:document>";
    const std::string bomb = cbltest::make_zip({{"word/document.xml", xml}});
    ASSERT_LT(bomb.size(), 64u << 10);
    extract_limits lim;
    lim.max_bytes = 1 << 20;
    const std::string why = extract_error(bomb, doc_kind::docx, lim);
    EXPECT_TRUE(contains(why, "word/document.xml inflates past 1048576 bytes")) << why;
}

TEST(ExtractDocx, DamagedFilesSayWhat) {
    EXPECT_TRUE(contains(extract_error("PK\x03\x04 not really", doc_kind::docx),
                         "damaged docx: not a zip archive"));
    EXPECT_TRUE(contains(extract_error(cbltest::make_zip({{"other.xml", "<a/>"}}), doc_kind::docx),
                         "damaged docx: cannot open word/document.xml"));
    EXPECT_TRUE(contains(extract_error(cbltest::make_zip({{"word/document.xml", "<w:document>"}}),
                                       doc_kind::docx),
                         "damaged docx: word/document.xml is not well-formed XML"));
    // An entity bomb (billion laughs) stays unexpanded: libxml2 is not asked to substitute.
    const std::string laughs =
        "<?xml version=\"1.0\"?><!DOCTYPE d [<!ENTITY a \"aaaaaaaaaa\">"
        "<!ENTITY b \"&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;\"><!ENTITY c \"&b;&b;&b;&b;&b;&b;&b;&b;&b;\">"
        "]><w:document xmlns:w=\"w\"><w:body><w:p><w:r><w:t>x&c;</w:t></w:r></w:p></w:body>"
        "</w:document>";
    try {
        const extracted_text ex =
            extract_text(cbltest::make_zip({{"word/document.xml", laughs}}), doc_kind::docx);
        EXPECT_LT(ex.text.size(), 2000u);
    } catch (const error& e) {
        EXPECT_EQ(e.code(), status::invalid_arg) << e.what();
    }
}

TEST(ExtractOdt, ParagraphsHeadingsAndSpaces) {
    const std::string odt = cbltest::make_odt({{"Garden notes", 1},
                                               {"Tomatoes need sun."},
                                               {"Watering", 2},
                                               {"Water early in the morning."}});
    const extracted_text ex = extract_text(odt, doc_kind::odt);
    EXPECT_EQ(ex.text,
              "Garden notes\n\nTomatoes need sun.\n\nWatering\n\nWater early in the morning.");
    EXPECT_EQ(ex.section_at(ex.text.find("Tomatoes"))->heading, "Garden notes");
    EXPECT_EQ(ex.section_at(ex.text.find("Water early"))->heading, "Watering");
    const std::string xml =
        "<office:document-content xmlns:office=\"o\" xmlns:text=\"t\"><office:body><office:text>"
        "<text:p>a<text:s text:c=\"3\"/>b<text:tab/>c<text:span>d</text:span>"
        "<office:annotation><text:p>comment</text:p></office:annotation></text:p>"
        "</office:text></office:body></office:document-content>";
    EXPECT_EQ(extract_text(cbltest::make_zip({{"content.xml", xml}}), doc_kind::odt).text,
              "a b cd");  // whitespace runs collapse to one space
}

#else

TEST(ExtractDocx, WithoutLibzipDocxIsUnsupported) {
    EXPECT_EQ(extract_error("PK", doc_kind::docx), "unsupported file type (built without libzip)");
}

#endif

TEST(ExtractHtml, Iso88591ByMetaCharset) {
    const std::string html =
        "<html><head><meta charset=\"iso-8859-1\"><title>Men\xFA</title></head>"
        "<body><p>Caf\xE9 cr\xE8me &euro;3 &hearts; &frac12;</p></body></html>";
    const extracted_text ex = extract_text(html, doc_kind::html);
    EXPECT_EQ(ex.text,
              "Men\xC3\xBA\n\nCaf\xC3\xA9 cr\xC3\xA8me \xE2\x82\xAC"
              "3 \xE2\x99\xA5 "
              "\xC2\xBD");
    // The citation of "Café" lies inside the source's <p> element.
    const size_t cafe = ex.text.find("Caf");
    const size_t p = html.find("<p>") + 3;
    EXPECT_GE(ex.source_begin(cafe), p);
    EXPECT_LE(ex.source_end(cafe + 5), html.find("</p>"));
}

TEST(ExtractHtml, UndeclaredLatin1AndHttpEquiv) {
    // No declaration: libxml2 falls back to ISO-8859-1 for bytes that are not UTF-8.
    EXPECT_EQ(extract_text("<p>na\xEFve</p>", doc_kind::html).text, "na\xC3\xAFve");
    const std::string equiv =
        "<html><head><meta http-equiv=\"Content-Type\" content=\"text/html; "
        "charset=windows-1252\"></head><body><p>\x93quoted\x94</p></body></html>";
    EXPECT_EQ(extract_text(equiv, doc_kind::html).text, "\xE2\x80\x9Cquoted\xE2\x80\x9D");
}

TEST(ExtractHtml, HeadingsAndSkippedElements) {
    const std::string html =
        "<h1>Guide</h1><p>Intro text.</p><script>var hidden = 1;</script><style>p{}</style>"
        "<h2>Setup <em>steps</em></h2><p>Install it.</p><noscript>no js</noscript><!-- c -->";
    const extracted_text ex = extract_text(html, doc_kind::html);
    EXPECT_EQ(ex.text, "Guide\n\nIntro text.\n\nSetup steps\n\nInstall it.");
    EXPECT_EQ(ex.section_at(ex.text.find("Intro"))->heading, "Guide");
    EXPECT_EQ(ex.section_at(ex.text.find("Install"))->heading, "Setup steps");
    EXPECT_EQ(ex.section_at(ex.text.find("Setup"))->heading, "Setup steps");
}

TEST(ExtractPlain, Latin1IsConvertedWithSourceOffsets) {
    const std::string src =
        "caf\xE9 au lait, cr\xE8me br\xFBl\xE9"
        "e";
    const extracted_text ex = extract_text(src, doc_kind::text);
    EXPECT_EQ(ex.text,
              "caf\xC3\xA9 au lait, cr\xC3\xA8me br\xC3\xBBl\xC3\xA9"
              "e");
    // Both bytes of the UTF-8 "é" come from source byte 3.
    EXPECT_EQ(ex.source_begin(3), 3u);
    EXPECT_EQ(ex.source_end(5), 4u);
    EXPECT_EQ(ex.source_begin(6), 5u);  // "au" after it
}

TEST(ExtractPlain, Utf16WithBom) {
    const std::string le("\xFF\xFEh\0i\0 \0\xE9\0", 10);
    EXPECT_EQ(extract_text(le, doc_kind::text).text, "hi \xC3\xA9");
    const std::string be("\xFE\xFF\0h\0i", 6);
    EXPECT_EQ(extract_text(be, doc_kind::markdown).text, "hi");
}

TEST(ExtractPlain, CsvAndJsonAreText) {
    EXPECT_EQ(extract_text("name,color\napple,red\n", doc_kind::csv).text,
              "name,color\napple,red\n");
    EXPECT_EQ(extract_text("{\"fruit\": \"kiwi\"}", doc_kind::json).text, "{\"fruit\": \"kiwi\"}");
}

TEST(Sniff, ExtensionlessTextIsReadAndBinariesRefused) {
    doc_kind k = doc_kind::pdf;
    std::string why;
    EXPECT_TRUE(detect_kind("/src/README", "This project grows apples.\nSee LICENSE.\n", &k, &why));
    EXPECT_EQ(k, doc_kind::text);
    std::string bin(4096, '\0');
    for (size_t i = 0; i < bin.size(); ++i) bin[i] = static_cast<char>((i * 7919 + 13) % 256);
    EXPECT_FALSE(detect_kind("/src/blob", bin, &k, &why));
    EXPECT_EQ(why, "binary file (application/octet-stream)");
#if CBL_HAVE_POPPLER
    EXPECT_TRUE(detect_kind("/src/report", two_page_pdf(), &k, &why));
    EXPECT_EQ(k, doc_kind::pdf);
#endif
    EXPECT_TRUE(detect_kind("/src/page", "<!DOCTYPE html><html><body>x</body></html>", &k, &why));
    EXPECT_EQ(k, doc_kind::html);
    EXPECT_TRUE(detect_kind("/src/notes.txt", bin, &k, &why));  // the extension decides
    EXPECT_EQ(k, doc_kind::text);
    // /usr/share/common-licenses: extensionless, text (Debian has it everywhere).
    std::ifstream gpl("/usr/share/common-licenses/GPL-3", std::ios::binary);
    if (gpl) {
        std::stringstream ss;
        ss << gpl.rdbuf();
        EXPECT_TRUE(detect_kind("/usr/share/common-licenses/GPL-3", ss.str(), &k, &why)) << why;
        EXPECT_EQ(k, doc_kind::text);
        EXPECT_TRUE(contains(extract_text(ss.str(), k).text, "GNU GENERAL PUBLIC LICENSE"));
    }
}
