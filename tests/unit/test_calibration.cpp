// The calibration record file (core/blend/calibration.h): round trip, one record per (model,
// format), missing = none, damaged = an error (never a guess), a damaged file replaced by the next
// write, and a failure injected at every write step leaves the previous file intact.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

#include "core/blend/calibration.h"
#include "core/util/error.h"
#include "util/faulty-io.h"

using namespace cacheblend;

namespace {

class Calibration : public ::testing::Test {
protected:
    void SetUp() override {
        char tmpl[] = "/tmp/cbl-calib-XXXXXX";
        ASSERT_NE(::mkdtemp(tmpl), nullptr);
        dir_ = tmpl;
    }
    void TearDown() override {
        if (std::system(("rm -rf '" + dir_ + "'").c_str()) != 0) ADD_FAILURE() << "cleanup";
    }
    std::string file() const { return dir_ + "/calibration"; }
    void put(const std::string& text) const {
        std::ofstream(file(), std::ios::binary | std::ios::trunc) << text;
    }
    std::string dir_;
};

calibration make(uint64_t fp, kv_format f, float ratio, bool met) {
    calibration c;
    c.model_fingerprint = fp;
    c.format = f;
    c.ratio = ratio;
    c.met = met;
    c.metric = "kl";
    c.target = 0.05;
    c.value = 0.0468;
    c.records = 20;
    return c;
}

TEST_F(Calibration, RoundTripPerModelAndFormat) {
    EXPECT_FALSE(read_calibration(dir_, 1, kv_format::f16)) << "no file: no record";
    write_calibration(dir_, make(0xabcdef0123456789ull, kv_format::f16, 0.3f, true));
    write_calibration(dir_, make(0xabcdef0123456789ull, kv_format::q8, 1.f, false));
    write_calibration(dir_, make(7, kv_format::f16, 0.15f, true));
    auto c = read_calibration(dir_, 0xabcdef0123456789ull, kv_format::f16);
    ASSERT_TRUE(c);
    EXPECT_FLOAT_EQ(c->ratio, 0.3f);
    EXPECT_TRUE(c->met);
    EXPECT_EQ(c->metric, "kl");
    EXPECT_DOUBLE_EQ(c->target, 0.05);
    EXPECT_DOUBLE_EQ(c->value, 0.0468);
    EXPECT_EQ(c->records, 20);
    c = read_calibration(dir_, 0xabcdef0123456789ull, kv_format::q8);
    ASSERT_TRUE(c);
    EXPECT_FALSE(c->met);
    EXPECT_FALSE(read_calibration(dir_, 8, kv_format::f16));

    // A new measurement replaces the old one of its key only.
    write_calibration(dir_, make(7, kv_format::f16, 0.2f, true));
    EXPECT_FLOAT_EQ(read_calibration(dir_, 7, kv_format::f16)->ratio, 0.2f);
    EXPECT_FLOAT_EQ(read_calibration(dir_, 0xabcdef0123456789ull, kv_format::f16)->ratio, 0.3f);
    struct stat st {};
    ASSERT_EQ(::stat(file().c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST_F(Calibration, DamagedFilesAreErrorsThenReplaced) {
    const auto code = [&](const std::string& text) {
        put(text);
        try {
            read_calibration(dir_, 7, kv_format::f16);
        } catch (const error& e) {
            return e.code();
        }
        return status::ok;
    };
    EXPECT_EQ(code("not a calibration file\n"), status::format);
    EXPECT_EQ(code(""), status::format);
    const std::string magic = "cacheblend-calibration 1\n";
    EXPECT_EQ(code(magic + "0000000000000007 f16 0.3 1 kl 0.05 0.04 20\n"), status::ok);
    EXPECT_EQ(code(magic + "0000000000000007 f16 0.3 1 kl 0.05 0.04\n"), status::corrupt);
    EXPECT_EQ(code(magic + "0000000000000007 f16 0.3 1 kl 0.05 0.04 20 extra\n"), status::corrupt);
    EXPECT_EQ(code(magic + "7 f16 0.3 1 kl 0.05 0.04 20\n"), status::corrupt);
    EXPECT_EQ(code(magic + "000000000000000g f16 0.3 1 kl 0.05 0.04 20\n"), status::corrupt);
    EXPECT_EQ(code(magic + "0000000000000007 f32 0.3 1 kl 0.05 0.04 20\n"), status::corrupt);
    EXPECT_EQ(code(magic + "0000000000000007 f16 1.5 1 kl 0.05 0.04 20\n"), status::corrupt);
    EXPECT_EQ(code(magic + "0000000000000007 f16 0.3 2 kl 0.05 0.04 20\n"), status::corrupt);
    EXPECT_EQ(code(magic + "0000000000000007 f16 0.3 1 K;L 0.05 0.04 20\n"), status::corrupt);
    EXPECT_EQ(code(magic + "0000000000000007 f16 0.3 1 kl nan 0.04 20\n"), status::corrupt);
    EXPECT_EQ(code(magic + "0000000000000007 f16 0.3 1 kl 0.05 0.04 -1\n"), status::corrupt);
    put(std::string(2 << 20, 'x'));
    EXPECT_THROW(read_calibration(dir_, 7, kv_format::f16), error);

    // The next write replaces a damaged file with a good one.
    put(magic + "garbage\n");
    write_calibration(dir_, make(7, kv_format::f16, 0.1f, true));
    ASSERT_TRUE(read_calibration(dir_, 7, kv_format::f16));
    EXPECT_FLOAT_EQ(read_calibration(dir_, 7, kv_format::f16)->ratio, 0.1f);
}

TEST_F(Calibration, BadRecordsAreRefused) {
    calibration c = make(7, kv_format::f16, 0.3f, true);
    c.metric = "has space";
    EXPECT_THROW(write_calibration(dir_, c), error);
    c = make(7, kv_format::f16, 1.5f, true);
    EXPECT_THROW(write_calibration(dir_, c), error);
    c = make(7, kv_format::f16, 0.3f, true);
    c.value = std::numeric_limits<double>::infinity();
    EXPECT_THROW(write_calibration(dir_, c), error);
    EXPECT_FALSE(read_calibration(dir_, 7, kv_format::f16)) << "nothing was written";
}

TEST_F(Calibration, AFailedWriteLeavesTheOldRecords) {
    write_calibration(dir_, make(7, kv_format::f16, 0.3f, true));
    for (cbltest::io_op op : {cbltest::io_op::open, cbltest::io_op::write, cbltest::io_op::fsync,
                              cbltest::io_op::rename}) {
        auto io = std::make_shared<cbltest::faulty_io>();
        // open: the read of the old file is open #0, the temp file #1.
        io->fail_nth(op, op == cbltest::io_op::open ? 1 : 0, EIO);
        EXPECT_THROW(write_calibration(dir_, make(7, kv_format::f16, 0.9f, true), io), error)
            << cbltest::io_op_name(op);
        EXPECT_EQ(io->fired(), 1u) << cbltest::io_op_name(op);
        auto c = read_calibration(dir_, 7, kv_format::f16);
        ASSERT_TRUE(c) << cbltest::io_op_name(op);
        EXPECT_FLOAT_EQ(c->ratio, 0.3f) << cbltest::io_op_name(op);
    }
    // No temp file is left behind.
    std::ostringstream cmd;
    cmd << "ls '" << dir_ << "' | grep -c tmp > /dev/null";
    EXPECT_NE(std::system(cmd.str().c_str()), 0) << "a temp file was left";
}

}  // namespace

// Issue 15: the record keeps the selection policy with the ratio; a record written before
// policies (8 fields) reads as hkvd, and hkvd is written in that old form.
TEST_F(Calibration, PolicyIsKeptWithTheRatio) {
    calibration c = make(7, kv_format::f16, 0.05f, true);
    c.select = select_policy::sink_hkvd;
    write_calibration(dir_, c);
    write_calibration(dir_, make(7, kv_format::q8, 0.15f, true));
    EXPECT_EQ(read_calibration(dir_, 7, kv_format::f16)->select, select_policy::sink_hkvd);
    EXPECT_EQ(read_calibration(dir_, 7, kv_format::q8)->select, select_policy::hkvd);
    std::ifstream in(file());
    std::stringstream text;
    text << in.rdbuf();
    EXPECT_NE(text.str().find(" 20 sink+hkvd\n"), std::string::npos) << text.str();
    EXPECT_NE(text.str().find(" 20\n"), std::string::npos) << "hkvd: the old 8 fields";

    const std::string magic = "cacheblend-calibration 1\n";
    put(magic + "0000000000000007 f16 0.3 1 kl 0.05 0.04 20\n");
    EXPECT_EQ(read_calibration(dir_, 7, kv_format::f16)->select, select_policy::hkvd);
    put(magic + "0000000000000007 f16 0.3 1 kl 0.05 0.04 20 query\n");
    EXPECT_EQ(read_calibration(dir_, 7, kv_format::f16)->select, select_policy::query);
    for (const char* bad : {" 20 Sink\n", " 20 sink extra\n"}) {
        put(magic + "0000000000000007 f16 0.3 1 kl 0.05 0.04" + bad);
        try {
            read_calibration(dir_, 7, kv_format::f16);
            ADD_FAILURE() << bad;
        } catch (const error& e) {
            EXPECT_EQ(e.code(), status::corrupt) << bad;
        }
    }
}
