// File integrity (checksums on everything Glimpse writes) and resource errors (full disk,
// read-only folder, a file replaced while open, huge images, huge videos). docs/integrity.md.
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <QDir>
#include <QFile>
#include <QTemporaryDir>
#include <QtTest>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/videoio.hpp>
#include <torch/torch.h>

#include "core/error.h"
#include "core/h5/h5.h"
#include "core/io/checkpoint.h"
#include "core/io/image.h"
#include "core/io/integrity.h"
#include "core/io/video.h"
#include "core/replay/episode_reader.h"
#include "core/rl/episode.h"
#include "core/trace.h"
#include "tests/support.h"
#include "tests/integrity_support.h"

using namespace glimpse;
using glimpse::testing::contains;
using namespace glimpse::testing;
using testing::errorOf;

namespace {

// ---- the three file kinds, written small but with every kind of dataset they hold ----------

Checkpoint sampleCheckpoint() {
    Checkpoint c;
    c.family = "test";
    c.configJson = R"({"depth": 4, "width": 64, "lr": 0.001, "name": "integrity"})";
    torch::manual_seed(3);
    c.tensors["blocks.0.attn.qkv.weight"] = torch::randn({96, 32});
    c.tensors["blocks.0.attn.qkv.bias"] = torch::randn({96});
    c.tensors["blocks.0.norm.num_batches_tracked"] = torch::tensor(int64_t(1234));   // 0-d
    c.tensors["blocks.0.scale"] = torch::tensor(0.5f);                                 // 0-d
    c.tensors["head.weight"] = torch::randn({10, 96});
    c.tensors["head.mask"] = torch::rand({10}) > 0.5;
    return c;
}

Trace sampleTrace() {
    Trace t("test");
    t.meta()["image"] = "photo.jpg";
    t.meta()["threshold"] = 0.25;
    torch::manual_seed(5);
    t.set("logits", torch::randn({3, 100}));
    t.set("attn/layer0", torch::rand({4, 49, 49}));
    t.set("attn/layer1", torch::rand({4, 49, 49}));
    t.set("score", torch::tensor(0.75));                  // 0-d
    t.set("best", torch::tensor(int64_t(17)));            // 0-d
    t.set("boxes", torch::randint(0, 255, {20, 4}, torch::kInt32));
    return t;
}

rl::Episode sampleEpisode() {
    rl::Episode e;
    e.env = "breakout";
    e.source = "test";
    e.seed = 7;
    e.maxEpisodeSteps = 100;
    e.actionNames = {"NOOP", "FIRE", "RIGHT", "LEFT"};
    e.channelNames = {"a", "b"};
    e.episodeReturn = 3;
    e.terminal = true;
    const int64_t T = 24;
    torch::manual_seed(9);
    e.frames = torch::randint(0, 256, {T, 24, 32, 3}, torch::kUInt8);
    e.observations = torch::rand({T, 2, 8, 8});
    e.actions = torch::randint(0, 4, {T}, torch::kInt64);
    e.rewards = torch::rand({T});
    e.lives = torch::full({T}, 3, torch::kInt32);
    e.hasModel = true;
    e.model.family = "efficientzero";
    e.model.checkpoint = "run/model.h5";
    e.model.config = "{\"x\": 1}";
    e.model.simulations = 8;
    e.model.rootValues = torch::rand({T});
    e.model.policy = torch::softmax(torch::randn({T, 4}), 1);
    return e;
}

std::string checkpointDigest(const std::string& path) {
    const Checkpoint c = loadCheckpoint(path);
    Digest d;
    d.add(c.family).add(c.configJson);
    for (const auto& [name, t] : c.tensors) d.add(name).add(t);
    return d.hex();
}

std::string traceDigest(const std::string& path) {
    const Trace t = Trace::load(path);
    Digest d;
    d.add(t.family()).add(t.meta().dump());
    for (const auto& n : t.names()) d.add(n).add(t.get(n));
    return d.hex();
}

std::string episodeDigest(const std::string& path) {
    const rl::Episode e = rl::readEpisode(path);
    Digest d;
    d.add(e.env).add(e.source).add(std::to_string(e.seed)).add(std::to_string(e.maxEpisodeSteps));
    d.add(std::to_string(e.episodeReturn)).add(std::to_string(e.terminal)).add(std::to_string(e.stickyActionProb));
    for (const auto& n : e.actionNames) d.add(n);
    for (const auto& n : e.channelNames) d.add(n);
    for (const auto* t : {&e.frames, &e.observations, &e.actions, &e.rewards, &e.lives, &e.terminals, &e.lifeLoss})
        d.add(*t);
    d.add(e.model.family).add(e.model.checkpoint).add(e.model.config).add(std::to_string(e.model.simulations));
    for (const auto* t : {&e.model.rootValues, &e.model.policy, &e.model.visitCounts, &e.model.value})
        d.add(*t);
    return d.hex();
}


// Runs f() in a forked child after prepare() (e.g. a file size limit, another uid); returns
// the message of the exception f() threw, "<no error>" when it returned, or "<crashed>".
std::string errorInChild(const std::function<void()>& prepare, const std::function<void()>& f) {
    int fds[2];
    if (::pipe(fds) != 0) return "<pipe failed>";
    std::fflush(nullptr);
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::close(fds[0]);
        ::alarm(60);
        std::string text;
        try {
            prepare();
            f();
            text = "<no error>";
        } catch (const std::exception& e) {
            text = e.what();
        }
        if (::write(fds[1], text.data(), text.size()) < 0) ::_exit(2);
        ::_exit(0);
    }
    ::close(fds[1]);
    std::string out;
    char buf[4096];
    ssize_t n;
    while ((n = ::read(fds[0], buf, sizeof buf)) > 0) out.append(buf, size_t(n));
    ::close(fds[0]);
    int status = 0;
    ::waitpid(pid, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? out : "<crashed>";
}

// Files in `dir` (names only), sorted.
QStringList filesIn(const QString& dir) {
    return QDir(dir).entryList(QDir::Files | QDir::Hidden | QDir::NoDotAndDotDot, QDir::Name);
}

std::string readAll(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// The writers under test, each writing a file of about `mb` MiB of incompressible data.
struct Writer {
    const char* kind;
    std::function<void(const std::string&, int mb)> write;
};
std::vector<Writer> writers() {
    return {
        {"checkpoint",
         [](const std::string& p, int mb) {
             Checkpoint c = sampleCheckpoint();
             c.tensors["big"] = torch::rand({mb * 256, 1024});
             saveCheckpoint(p, c);
         }},
        {"trace",
         [](const std::string& p, int mb) {
             Trace t = sampleTrace();
             t.set("big", torch::rand({mb * 256, 1024}));
             t.save(p);
         }},
        {"episode",
         [](const std::string& p, int mb) {
             rl::Episode e = sampleEpisode();
             const int64_t T = e.length();
             e.frames = torch::randint(0, 256, {T, 16 + 128 * mb, 114, 3}, torch::kUInt8);   // ~1 MiB per mb
             rl::writeEpisode(p, e);
         }},
    };
}

// A PNG whose header declares w x h 8-bit grey pixels, with a few bytes of (garbage) image
// data: enough for a decoder to start, nothing like the w * h bytes it would need.
std::string pngHeaderOnly(uint32_t w, uint32_t h) {
    auto be32 = [](uint32_t v) {
        return std::string{char(v >> 24), char(v >> 16), char(v >> 8), char(v)};
    };
    auto crc = [](const std::string& data) {
        uint32_t c = 0xFFFFFFFFu;
        for (unsigned char b : data) {
            c ^= b;
            for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
        }
        return c ^ 0xFFFFFFFFu;
    };
    auto chunk = [&](const std::string& type, const std::string& data) {
        return be32(uint32_t(data.size())) + type + data + be32(crc(type + data));
    };
    const std::string ihdr = be32(w) + be32(h) + std::string{8, 0, 0, 0, 0};   // 8-bit grey
    return std::string("\x89PNG\r\n\x1a\n", 8) + chunk("IHDR", ihdr) +
           chunk("IDAT", std::string("\x78\x9c\x63\x00\x00\x00\x01\x00\x01", 9)) + chunk("IEND", "");
}

// A JPEG prefix (SOI + baseline SOF0) declaring w x h: what the header check reads.
std::string jpegHeaderOnly(uint16_t w, uint16_t h) {
    std::string s("\xFF\xD8\xFF\xC0\x00\x0B\x08", 7);
    s += char(h >> 8);
    s += char(h & 0xFF);
    s += char(w >> 8);
    s += char(w & 0xFF);
    s += std::string("\x01\x01\x11\x00\xFF\xD9", 6);
    return s;
}

// An MJPEG AVI of `frames` 64x48 frames, frame i a flat grey of level 4 * i.
void writeClip(const std::string& path, int frames) {
    cv::VideoWriter vw(path, cv::VideoWriter::fourcc('M', 'J', 'P', 'G'), 25.0, cv::Size(64, 48));
    for (int i = 0; i < frames; ++i) vw.write(cv::Mat(48, 64, CV_8UC3, cv::Scalar::all(4 * i)));
}

long maxRssKiB() {
    struct rusage ru;
    ::getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

void printRow(const char* kind, const char* region, const FlipStats& s) {
    std::printf("bitflip %-22s %-6s copies %3d: refused %3d, unchanged %3d, silently different %3d, crashed %3d\n",
                kind, region, s.copies, s.refused, s.unchanged, s.silent, s.crashed);
    for (const auto& m : s.messages) std::printf("    e.g. %s\n", m.c_str());
    for (const auto b : s.silentAt)
        std::printf("    SILENT: bit %lld of byte %lld\n", (long long)(b % 8), (long long)(b / 8));
}

} // namespace

class TestIntegrity : public QObject {
    Q_OBJECT

    QTemporaryDir dir_;
    std::string file(const char* name) const { return dir_.filePath(name).toStdString(); }

    // Flips `copies` seeded random bits (one per copy) across the whole file and across the
    // raw-data bytes of its datasets; every load runs in a forked child (a crash is counted,
    // not fatal). No copy may load with other values than the original, none may crash.
    void measure(const char* kind, const std::string& path, const std::function<std::string(const std::string&)>& digest,
                 bool expectChecked) {
        // GLIMPSE_BITFLIP_COPIES raises the count for a measurement (docs/integrity.md).
        const int copies = std::max(32, qEnvironmentVariableIntValue("GLIMPSE_BITFLIP_COPIES"));
        const FlipStats whole = flipBits(path, file("copy.h5"), digest, FlipRegion::WholeFile, copies, 1000);
        const FlipStats data = flipBits(path, file("copy.h5"), digest, FlipRegion::RawData, copies, 2000);
        const FlipStats meta = flipBits(path, file("copy.h5"), digest, FlipRegion::Metadata, copies, 3000);
        printRow(kind, "file", whole);
        printRow(kind, "data", data);
        printRow(kind, "meta", meta);
        QCOMPARE(whole.copies + data.copies + meta.copies, 3 * copies);
        if (!expectChecked) return;
        for (const FlipStats* s : {&whole, &data, &meta}) {
            QCOMPARE(s->crashed, 0);
            QCOMPARE(s->silent, 0);
        }
        // The raw-data flips all hit checked bytes.
        QCOMPARE(data.refused, copies);
    }

    // Flips one bit of the first occurrence of `needle` in the file at `path`.
    static void flipInside(const std::string& path, const std::string& needle, size_t offset) {
        std::string bytes = readAll(path);
        const size_t at = bytes.find(needle);
        QVERIFY2(at != std::string::npos, "the bytes are stored as they are");
        QVERIFY2(bytes.find(needle, at + 1) == std::string::npos, "once");
        bytes[at + offset] = char(bytes[at + offset] ^ 0x04);
        std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), std::streamsize(bytes.size()));
    }

private Q_SLOTS:
    void initTestCase() {
        QVERIFY(dir_.isValid());
        torch::set_num_threads(1);
    }

    void bitFlipsInCheckpoints() {
        const std::string path = file("ckpt.h5");
        saveCheckpoint(path, sampleCheckpoint());
        measure("checkpoint (written)", path, checkpointDigest, true);
    }

    void bitFlipsInShippedCheckpoints() {
        for (const char* name : {"coat_fmnist.h5", "constellation_demo.h5"}) {
            const std::string path = std::string(GLIMPSE_SOURCE_DIR) + "/resources/" + name;
            if (!QFile::exists(QString::fromStdString(path))) QSKIP("shipped checkpoint missing");
            measure(name, path, checkpointDigest, true);
        }
    }

    void bitFlipsInTraces() {
        const std::string path = file("trace.h5");
        sampleTrace().save(path);
        measure("trace", path, traceDigest, true);
    }

    void bitFlipsInEpisodes() {
        const std::string path = file("episode.h5");
        rl::writeEpisode(path, sampleEpisode());
        measure("episode", path, episodeDigest, true);
    }

    // The pieces random flips rarely hit, flipped on purpose: a 0-d tensor's value, the config
    // JSON, a trace's meta JSON. Each is refused, naming the file.
    void scalarsAndStringsAreChecked() {
        const std::string path = file("targeted.h5");
        Checkpoint c = sampleCheckpoint();
        c.tensors["blocks.0.norm.num_batches_tracked"] = torch::tensor(int64_t(0x1122334455667788));
        saveCheckpoint(path, c);
        QCOMPARE(checkpointDigest(path), checkpointDigest(path));
        const int64_t v = 0x1122334455667788;
        flipInside(path, std::string(reinterpret_cast<const char*>(&v), 8), 3);
        std::string err = errorOf([&] { loadCheckpoint(path); });
        QVERIFY2(contains(err, {path, "blocks.0.norm.num_batches_tracked", "checksum mismatch", "corrupt"}), err.c_str());

        saveCheckpoint(path, c);
        flipInside(path, "\"lr\": 0.001", 8);   // 0.001 -> 0.005 would be a valid, different JSON
        err = errorOf([&] { loadCheckpoint(path); });
        QVERIFY2(contains(err, {path, "checksum mismatch", "corrupt"}), err.c_str());

        const std::string tpath = file("targeted_trace.h5");
        sampleTrace().save(tpath);
        flipInside(tpath, "photo.jpg", 0);
        err = errorOf([&] { Trace::load(tpath); });
        QVERIFY2(contains(err, {tpath, "checksum mismatch", "corrupt"}), err.c_str());
    }

    // Files written before checksums (HDF5 1.8 format bounds, contiguous datasets, a scalar,
    // variable-length string attributes, as the old writer and h5py's defaults made them)
    // still load, with the same values.
    void filesWithoutChecksumsStillLoad() {
        const std::string path = file("old.h5");
        const Checkpoint c = sampleCheckpoint();
        {
            hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
            H5Pset_libver_bounds(fapl, H5F_LIBVER_EARLIEST, H5F_LIBVER_LATEST);
            hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
            QVERIFY(f >= 0);
            hid_t str = H5Tcopy(H5T_C_S1);
            H5Tset_size(str, H5T_VARIABLE);
            auto strAttr = [&](hid_t obj, const char* name, const std::string& value) {
                hid_t sp = H5Screate(H5S_SCALAR);
                hid_t a = H5Acreate2(obj, name, str, sp, H5P_DEFAULT, H5P_DEFAULT);
                const char* p = value.c_str();
                H5Awrite(a, str, &p);
                H5Aclose(a);
                H5Sclose(sp);
            };
            auto intAttr = [&](hid_t obj, const char* name, int64_t value) {
                hid_t sp = H5Screate(H5S_SCALAR);
                hid_t a = H5Acreate2(obj, name, H5T_STD_I64LE, sp, H5P_DEFAULT, H5P_DEFAULT);
                H5Awrite(a, H5T_NATIVE_INT64, &value);
                H5Aclose(a);
                H5Sclose(sp);
            };
            strAttr(f, "kind", "glimpse.checkpoint");
            intAttr(f, "format_version", 1);
            hid_t meta = H5Gcreate2(f, "meta", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
            strAttr(meta, "family", c.family);
            strAttr(meta, "config", c.configJson);
            H5Gclose(meta);
            hid_t params = H5Gcreate2(f, "params", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
            for (const auto& [name, t0] : c.tensors) {
                const torch::Tensor t = t0.scalar_type() == torch::kBool ? t0.to(torch::kUInt8) : t0.contiguous();
                std::vector<hsize_t> dims(t.sizes().begin(), t.sizes().end());
                hid_t sp = dims.empty() ? H5Screate(H5S_SCALAR) : H5Screate_simple(int(dims.size()), dims.data(), nullptr);
                const hid_t type = t.scalar_type() == torch::kFloat32 ? H5T_IEEE_F32LE
                                   : t.scalar_type() == torch::kInt64 ? H5T_STD_I64LE
                                                                       : H5T_STD_U8LE;
                const hid_t mem = t.scalar_type() == torch::kFloat32 ? H5T_NATIVE_FLOAT
                                  : t.scalar_type() == torch::kInt64 ? H5T_NATIVE_INT64
                                                                      : H5T_NATIVE_UINT8;
                hid_t ds = H5Dcreate2(params, name.c_str(), type, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
                QVERIFY(ds >= 0);
                H5Dwrite(ds, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, t.data_ptr());
                if (t0.scalar_type() == torch::kBool) strAttr(ds, "dtype", "bool");
                H5Dclose(ds);
                H5Sclose(sp);
            }
            H5Gclose(params);
            H5Tclose(str);
            H5Fclose(f);
            H5Pclose(fapl);
        }
        const Checkpoint back = loadCheckpoint(path);
        QCOMPARE(back.family, c.family);
        QCOMPARE(back.configJson, c.configJson);
        QCOMPARE(back.tensors.size(), c.tensors.size());
        for (const auto& [name, t] : c.tensors) QVERIFY2(torch::equal(back.tensors.at(name), t), name.c_str());
        // verifyFile tells it apart from a checked file, and resave makes it one.
        QVERIFY(!verifyFile(path).fullyChecked());
        resaveCheckpoint(path, path);
        QVERIFY(verifyFile(path).fullyChecked());
        QCOMPARE(checkpointDigest(path), [&] {
            Digest d;
            d.add(c.family).add(c.configJson);
            for (const auto& [name, t] : c.tensors) d.add(name).add(t);
            return d.hex();
        }());
    }

    // ---- resource errors ------------------------------------------------------------------

    // A full disk, simulated with a file size limit (RLIMIT_FSIZE, SIGXFSZ ignored: writes past
    // it fail with EFBIG as they would with ENOSPC): the save fails with a message naming the
    // file, the previous file at that path is untouched and no temp file is left behind.
    void fullDiskKeepsThePreviousFile() {
        QTemporaryDir d;
        for (const auto& w : writers()) {
            const std::string path = d.filePath(QString(w.kind) + ".h5").toStdString();
            w.write(path, 0);   // the previous version: small
            const std::string before = readAll(path);
            QVERIFY(before.size() < 200 * 1024);
            const std::string err = errorInChild(
                [] {
                    ::signal(SIGXFSZ, SIG_IGN);
                    struct rlimit lim = {512 * 1024, 512 * 1024};
                    if (::setrlimit(RLIMIT_FSIZE, &lim) != 0) throw std::runtime_error("setrlimit failed");
                },
                [&] { w.write(path, 2); });
            std::printf("full disk, %s: %s\n", w.kind, err.c_str());
            QVERIFY2(contains(err, {path, std::strerror(EFBIG)}), err.c_str());
            QVERIFY2(readAll(path) == before, w.kind);
            QCOMPARE(filesIn(d.path()).filter(".tmp-").size(), 0);
        }
        QCOMPARE(filesIn(d.path()), (QStringList{"checkpoint.h5", "episode.h5", "trace.h5"}));
        // Without the limit the same writes succeed (the limit was what failed them).
        for (const auto& w : writers()) w.write(d.filePath(QString(w.kind) + ".h5").toStdString(), 2);
    }

    // A read-only output folder: a clear error naming the folder, nothing left in it. Root
    // ignores permissions, so as root the writes run in a child that has switched to the
    // unprivileged uid 65534 ("nobody").
    void readOnlyFolderIsNamed() {
        QTemporaryDir d;
        QVERIFY(QFile::setPermissions(d.path(), QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner |
                                                    QFile::ReadGroup | QFile::ExeGroup | QFile::ReadOther |
                                                    QFile::ExeOther));
        const std::string ro = d.filePath("readonly").toStdString();
        QVERIFY(::mkdir(ro.c_str(), 0555) == 0);
        QVERIFY(::chmod(ro.c_str(), 0555) == 0);
        const bool root = ::geteuid() == 0;
        auto asUser = [root] {
            if (root && (::setgid(65534) != 0 || ::setuid(65534) != 0))
                throw std::runtime_error("cannot switch to uid 65534");
        };
        auto all = writers();
        all.push_back({"image", [](const std::string& p, int) { saveImagePNG(p, cv::Mat(8, 8, CV_8UC3, cv::Scalar(1, 2, 3))); }});
        for (const auto& w : all) {
            const std::string path = ro + "/" + w.kind + ".h5";
            const std::string err = errorInChild(asUser, [&] { w.write(path, 0); });
            std::printf("read-only folder, %s: %s\n", w.kind, err.c_str());
            if (err == "cannot switch to uid 65534") QSKIP("root without the right to switch users (a container?)");
            QVERIFY2(contains(err, {path, "cannot write into the folder " + ro, std::strerror(EACCES)}), err.c_str());
        }
        QCOMPARE(filesIn(QString::fromStdString(ro)).size(), 0);
        QVERIFY(::chmod(ro.c_str(), 0755) == 0);
    }

    // An episode open in the reader while another writer replaces it (atomic rename, as every
    // Glimpse writer does) keeps reading the old file; truncated under the reader, a frame that
    // is gone gives a clear error naming the file and the step, never a crash or wrong pixels.
    void episodeReplacedWhileOpen() {
        QTemporaryDir d;
        const std::string path = d.filePath("ep.h5").toStdString();
        rl::Episode a = sampleEpisode();
        a.frames = torch::randint(0, 256, {a.length(), 48, 64, 3}, torch::kUInt8);
        rl::writeEpisode(path, a);
        {
            replay::EpisodeReader r(path);
            rl::Episode b = sampleEpisode();
            b.frames = torch::full_like(a.frames, 7);
            rl::writeEpisode(path, b);   // renamed over the open file
            for (int64_t t : {int64_t(0), a.length() - 1}) {
                const auto f = r.frame(t);
                const torch::Tensor want = a.frames[t].contiguous();
                QVERIFY(f->pixels.size() == size_t(want.numel()));
                QVERIFY(std::memcmp(f->pixels.data(), want.data_ptr(), f->pixels.size()) == 0);
            }
            QVERIFY(torch::equal(rl::readEpisode(path).frames, b.frames));   // new readers see the new file
        }
        // Truncated under an open reader: to the part before the frames, so no frame survives.
        rl::writeEpisode(path, a);
        {
            replay::EpisodeReader r(path);
            QVERIFY(::truncate(path.c_str(), 4096) == 0);
            int errors = 0;
            for (int64_t t = 0; t < a.length(); ++t) {
                const std::string err = errorOf([&] { r.frame(t); });
                if (err == "<no error>") continue;
                ++errors;
                QVERIFY2(contains(err, {path, "frames"}), err.c_str());
            }
            QCOMPARE(errors, int(a.length()));
        }
        // And once closed (HDF5 shares one open file between its readers), a fresh open of the
        // truncated file is refused with a clear error.
        const std::string err = errorOf([&] { replay::EpisodeReader again(path); });
        QVERIFY2(contains(err, {path}), err.c_str());
        QVERIFY2(err.find("<no error>") == std::string::npos, err.c_str());
    }

    // A trace or checkpoint file replaced or truncated between two loads: each load sees one
    // whole file or refuses the truncated one by name.
    void truncatedFilesAreRefused() {
        QTemporaryDir d;
        for (const auto& w : writers()) {
            const std::string path = d.filePath(QString(w.kind) + ".h5").toStdString();
            w.write(path, 1);
            const int64_t size = int64_t(readAll(path).size());
            for (int64_t keep : {size / 2, size - 100}) {
                w.write(path, 1);
                QVERIFY(::truncate(path.c_str(), keep) == 0);
                std::string err;
                if (std::string(w.kind) == "checkpoint") err = errorOf([&] { loadCheckpoint(path); });
                else if (std::string(w.kind) == "trace") err = errorOf([&] { Trace::load(path); });
                else err = errorOf([&] { rl::readEpisode(path); });
                QVERIFY2(contains(err, {path}) && err != "<no error>", err.c_str());
            }
        }
    }

    // A 30000 x 30000 image is refused from its header, before OpenCV would allocate 2.7 GB to
    // decode it; a 4000 x 3000 photo still loads.
    void hugeImageIsRefusedBeforeDecoding() {
        QTemporaryDir d;
        const std::string png = d.filePath("huge.png").toStdString();
        std::ofstream(png, std::ios::binary) << pngHeaderOnly(30000, 30000);
        QCOMPARE(peekImageSize(png), cv::Size(30000, 30000));
        const long rssBefore = maxRssKiB();
        std::string err = errorOf([&] { loadImageRGB(png); });
        QVERIFY2(contains(err, {png, "too large", "30000 x 30000", "20000", "100 megapixels"}), err.c_str());
        QVERIFY(maxRssKiB() - rssBefore < 100 * 1024);   // nothing near 900 MB was allocated
        const std::string jpg = d.filePath("huge.jpg").toStdString();
        std::ofstream(jpg, std::ios::binary) << jpegHeaderOnly(30000, 30000);
        err = errorOf([&] { loadImageRGB(jpg); });
        QVERIFY2(contains(err, {jpg, "too large", "30000 x 30000"}), err.c_str());
        // Within the limits: a real 4000 x 3000 JPEG decodes (values near the encoded ones).
        const std::string photo = d.filePath("photo.jpg").toStdString();
        cv::Mat bgr(3000, 4000, CV_8UC3, cv::Scalar(40, 120, 200));
        QVERIFY(cv::imwrite(photo, bgr));
        bgr.release();
        const cv::Mat rgb = loadImageRGB(photo);
        QCOMPARE(rgb.size(), cv::Size(4000, 3000));
        const cv::Vec3b px = rgb.at<cv::Vec3b>(1500, 2000);
        QVERIFY2(std::abs(px[0] - 200) <= 2 && std::abs(px[1] - 120) <= 2 && std::abs(px[2] - 40) <= 2, "RGB order");
    }

    // A 2 GB video (a real clip extended sparsely: no 2 GB on disk) opens without reading or
    // allocating in proportion to its size and streams its frames; with a damaged tail the
    // first frame that is gone gives a clear error naming the file and the frame.
    void hugeVideoStreams() {
        QTemporaryDir d;
        const std::string clip = d.filePath("clip.avi").toStdString();
        writeClip(clip, 60);
        const int64_t clipSize = int64_t(readAll(clip).size());
        const std::string huge = d.filePath("huge.avi").toStdString();
        QVERIFY(QFile::copy(QString::fromStdString(clip), QString::fromStdString(huge)));
        QVERIFY(::truncate(huge.c_str(), int64_t(2) << 30) == 0);
        struct stat st;
        QVERIFY(::stat(huge.c_str(), &st) == 0 && st.st_size == int64_t(2) << 30);
        const long rssBefore = maxRssKiB();
        {
            VideoReader r(huge);
            QCOMPARE(r.frameCount(), 60);
            for (int i = 0; i < 60; i += 7) {
                const cv::Mat f = r.frame(i);
                QVERIFY2(std::abs(int(f.at<cv::Vec3b>(24, 32)[0]) - 4 * i) <= 3, "frame content");
            }
        }
        QVERIFY(maxRssKiB() - rssBefore < 200 * 1024);
        // Damaged tail: the clip cut at 60 % (its index at the end is gone), then extended with
        // 64 MB of zeros. (FFmpeg's AVI demuxer looks for the lost index through the whole tail:
        // with a 2 GB tail that scan takes about 20 s here, in constant memory;
        // docs/integrity.md.)
        const std::string cut = d.filePath("cut.avi").toStdString();
        QVERIFY(QFile::copy(QString::fromStdString(clip), QString::fromStdString(cut)));
        QVERIFY(::truncate(cut.c_str(), clipSize * 6 / 10) == 0);
        QVERIFY(::truncate(cut.c_str(), int64_t(64) << 20) == 0);
        VideoReader r(cut);
        int firstBad = -1;
        std::string err;
        for (int i = 0; i < r.frameCount() && firstBad < 0; ++i) {
            err = errorOf([&] { r.frame(i); });
            if (err != "<no error>") firstBad = i;
        }
        std::printf("damaged video: %d frames declared, first bad frame %d: %s\n", r.frameCount(), firstBad, err.c_str());
        QVERIFY2(firstBad > 0, "the frames before the cut decode");
        QVERIFY2(contains(err, {cut, "frame " + std::to_string(firstBad)}), err.c_str());
        QVERIFY(maxRssKiB() - rssBefore < 200 * 1024);
    }
};

QTEST_GUILESS_MAIN(TestIntegrity)
#include "test_integrity.moc"
