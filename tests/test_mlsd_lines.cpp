// core/data/mlsd_lines.h: photos labelled by M-LSD (the dataset spec mlsd:LIST). A small
// random-weight M-LSD (input 64) stands in for the shipped model, so the test is fast; the
// labels are checked against mlsdPseudoLines on the same model, the cache round trip (the model
// is not even loaded when nothing changed), the rebuild of a stale entry, of another labeller's
// cache and of a corrupt cache, and the errors for a missing or corrupt photo.
#include <QTemporaryDir>
#include <QtTest>

#include <filesystem>
#include <fstream>

#include <opencv2/imgproc.hpp>
#include <torch/torch.h>

#include "core/data/mlsd_lines.h"
#include "core/data/open.h"
#include "core/error.h"
#include "core/h5/h5.h"
#include "core/io/checkpoint.h"
#include "core/io/image.h"
#include "core/models/mlsd/model.h"
#include "tests/support.h"

using namespace glimpse;
using namespace glimpse::data;
using testing::contains;
using testing::errorOf;
using testing::maxDiff;

namespace {

void writeText(const std::string& path, const std::string& text) {
    std::ofstream f(path, std::ios::binary);
    f << text;
}

cv::Mat photo(int w, int h, int seed) {
    cv::Mat img(h, w, CV_8UC3, cv::Scalar(40 + seed * 30, 90, 160));
    cv::rectangle(img, cv::Rect(w / 5, h / 4, w / 2, h / 2), cv::Scalar(230, 220, 200), cv::FILLED);
    cv::line(img, cv::Point(0, h - 10 - seed), cv::Point(w - 1, h / 2), cv::Scalar(10, 10, 10), 3);
    return img;
}

std::shared_ptr<mlsd::MlsdModel> smallModel() {
    torch::manual_seed(3);
    auto m = std::make_shared<mlsd::MlsdModel>();
    m->config.inputSize = 64;
    m->config.topK = 40;
    m->config.scoreThreshold = 0.0;
    m->config.lengthThreshold = 0.0;
    m->net = mlsd::MlsdTiny();
    // Spread the displacement outputs so that the random model's segments have lengths.
    torch::NoGradGuard g;
    for (auto& p : m->net->named_parameters())
        if (p.key().find("block16.conv3") != std::string::npos) p.value().mul_(40.0);
    m->net->eval();
    return m;
}

MlsdLabelOptions smallOptions() {
    MlsdLabelOptions o;
    o.scoreThreshold = 0.0;
    o.maxLines = 12;
    o.minLength = 1.0;
    return o;
}

} // namespace

class TestMlsdLines : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void cacheRoundTripAndRebuilds() {
        QTemporaryDir dir;
        const std::string d = dir.path().toStdString();
        QDir().mkpath(QString::fromStdString(d + "/images"));
        const cv::Mat a = photo(96, 64, 0), b = photo(80, 80, 1);
        saveImagePNG(d + "/images/a.png", a);
        saveImageJPEG(d + "/images/b.jpg", b, 90);
        const std::string list = d + "/photos.txt";
        writeText(list, "# two photos\nimages/a.png\n" + d + "/images/b.jpg\n");   // relative and absolute

        auto model = smallModel();
        int loads = 0;
        MlsdLabeller labeller{"test model 1", [&] {
                                  ++loads;
                                  return model;
                              }};
        std::vector<std::string> log;
        auto logger = [&](const std::string& m) { log.push_back(m); };

        MlsdPhotoLines first(list, labeller, smallOptions(), logger);
        QCOMPARE(first.size(), int64_t(2));
        QCOMPARE(first.labelledNow(), int64_t(2));
        QCOMPARE(loads, 1);
        QCOMPARE(first.cachePath(), list + ".mlsd.h5");
        QVERIFY(std::filesystem::exists(first.cachePath()));
        QVERIFY(contains(first.describe(), {"mlsd:" + list, "2 photos", "M-LSD"}));
        // The labels are M-LSD's lines of the decoded photo, kept by the options.
        torch::Tensor expected, scores;
        mlsdPseudoLines(*model, loadImageRGB(d + "/images/a.png"), smallOptions(), expected, scores);
        QVERIFY(expected.size(0) > 0);
        QVERIFY(expected.size(0) <= 12);
        const LineSample s0 = first.get(0);
        QCOMPARE(s0.name, std::string("a.png"));
        QCOMPARE(s0.image.cols, 96);
        QVERIFY(maxDiff(s0.lines, expected) == 0.0);
        QVERIFY(maxDiff(first.scores(0), scores) == 0.0);
        for (int64_t i = 0; i < expected.size(0); ++i) {   // inside the image
            QVERIFY(expected[i][0].item<float>() >= 0 && expected[i][0].item<float>() <= 96);
            QVERIFY(expected[i][1].item<float>() >= 0 && expected[i][1].item<float>() <= 64);
        }
        const torch::Tensor bLines = first.get(1).lines;

        // Reopened: everything from the cache, the model not loaded, the same labels.
        log.clear();
        MlsdPhotoLines second(list, labeller, smallOptions(), logger);
        QCOMPARE(second.labelledNow(), int64_t(0));
        QCOMPARE(loads, 1);
        QVERIFY(log.empty());
        QVERIFY(maxDiff(second.get(0).lines, expected) == 0.0);
        QVERIFY(maxDiff(second.get(1).lines, bLines) == 0.0);
        // The cache names the photos relative to its folder (the absolute entry too, it lies inside).
        {
            h5::File f = h5::File::open(second.cachePath());
            const torch::Tensor names = f.readTensor("paths", torch::kUInt8, {-1});
            const std::string all(reinterpret_cast<const char*>(names.data_ptr<uint8_t>()), size_t(names.numel()));
            QCOMPARE(all, std::string("images/a.png\nimages/b.jpg"));
        }

        // A changed photo (same name, other content) is labelled again, the other one reused.
        saveImagePNG(d + "/images/a.png", photo(96, 64, 3));
        log.clear();
        MlsdPhotoLines third(list, labeller, smallOptions(), logger);
        QCOMPARE(third.labelledNow(), int64_t(1));
        QCOMPARE(loads, 2);
        QVERIFY(!log.empty() && contains(log.front(), {"photos.txt.mlsd.h5", "1 of 2", "new or changed"}));
        mlsdPseudoLines(*model, loadImageRGB(d + "/images/a.png"), smallOptions(), expected, scores);
        QVERIFY(maxDiff(third.get(0).lines, expected) == 0.0);
        QVERIFY(maxDiff(third.get(1).lines, bLines) == 0.0);
        MlsdPhotoLines fourth(list, labeller, smallOptions(), logger);   // and cached again
        QCOMPARE(fourth.labelledNow(), int64_t(0));

        // Another labeller (model or options): the whole cache is rebuilt, with the reason.
        log.clear();
        MlsdLabelOptions stricter = smallOptions();
        stricter.maxLines = 3;
        MlsdPhotoLines fifth(list, labeller, stricter, logger);
        QCOMPARE(fifth.labelledNow(), int64_t(2));
        QVERIFY(fifth.get(0).lines.size(0) <= 3);
        QVERIFY(!log.empty() && contains(log.front(), {"rebuilding", "another labeller"}));
        log.clear();
        MlsdLabeller other{"test model 2", labeller.load};
        MlsdPhotoLines sixth(list, other, stricter, logger);
        QCOMPARE(sixth.labelledNow(), int64_t(2));
        QVERIFY(!log.empty() && contains(log.front(), {"another labeller", "test model 2"}));

        // A corrupt cache (not HDF5) and a foreign Glimpse file are rebuilt, not trusted.
        writeText(list + ".mlsd.h5", "garbage");
        log.clear();
        MlsdPhotoLines seventh(list, other, stricter, logger);
        QCOMPARE(seventh.labelledNow(), int64_t(2));
        QVERIFY(!log.empty() && contains(log.front(), {"rebuilding", "cannot be read"}));
        h5::writeAtomically(list + ".mlsd.h5", "glimpse.trace", 1, [](h5::File&) {});
        log.clear();
        MlsdPhotoLines eighth(list, other, stricter, logger);
        QCOMPARE(eighth.labelledNow(), int64_t(2));
        QVERIFY(!log.empty() && contains(log.front(), {"not an M-LSD label cache", "glimpse.trace"}));
        MlsdPhotoLines ninth(list, other, stricter, logger);
        QCOMPARE(ninth.labelledNow(), int64_t(0));

        // A photo replaced after the dataset was opened is refused when read, naming the file.
        saveImagePNG(d + "/images/a.png", photo(50, 40, 2));
        QVERIFY(contains(errorOf([&] { ninth.get(0); }), {"a.png", "50x40", "96x64", "changed"}));

        // A missing photo names the list and its line; a corrupt one names the file.
        writeText(d + "/missing.txt", "images/a.png\nimages/none.png\n");
        QVERIFY(contains(errorOf([&] { MlsdPhotoLines(d + "/missing.txt", other, stricter, logger); }),
                         {"missing.txt", "line 2", "none.png"}));
        writeText(d + "/images/c.png", "not a png");
        writeText(d + "/corrupt.txt", "images/a.png\nimages/c.png\n");
        QVERIFY(contains(errorOf([&] { MlsdPhotoLines(d + "/corrupt.txt", other, stricter, logger); }), {"c.png"}));
        // Photos to label and no model: said so.
        writeText(d + "/fresh.txt", "images/b.jpg\n");
        MlsdLabeller none{"no model", [] { return std::shared_ptr<mlsd::MlsdModel>(); }};
        QVERIFY(contains(errorOf([&] { MlsdPhotoLines(d + "/fresh.txt", none, stricter, logger); }),
                         {"fresh.txt", "no M-LSD model"}));
    }

    // The labels snapped onto the edges they nearly follow (MlsdLabelOptions::snapToEdges, spec
    // mlsd-snapped:LIST): mlsdPseudoLines keeps pseudoLabels of M-LSD's lines, and pseudoLabels moves
    // each line with eval::snapToEdge (tested on its own in test_line_metrics; ends trimmed by at
    // most 25%), after the score filter and before the count; the option is part of the cache's
    // identity.
    void labelsSnappedToEdges() {
        auto model = smallModel();
        const cv::Mat img = photo(96, 64, 1);
        torch::Tensor l0, s0, l1, s1;
        mlsdPseudoLines(*model, img, smallOptions(), l0, s0);
        pseudoLabels(mlsd::detectMlsd(*model, img), img, smallOptions(), l1, s1);
        QVERIFY(maxDiff(l0, l1) == 0.0 && maxDiff(s0, s1) == 0.0);
        // A step edge at x = 48 and lines beside it.
        cv::Mat step(64, 96, CV_8UC3, cv::Scalar(30, 30, 30));
        step(cv::Rect(48, 0, 48, 64)).setTo(cv::Scalar(220, 220, 220));
        const std::vector<eval::ScoredLine> found{{49.8f, 4.0f, 47.0f, 60.0f, 0.9f},    // beside the edge
                                                  {20.0f, 4.0f, 20.0f, 60.0f, 0.8f},    // no edge near
                                                  {46.5f, 10.0f, 46.5f, 50.0f, 0.2f}};  // below the score
        MlsdLabelOptions o = smallOptions();
        o.scoreThreshold = 0.5;
        QVERIFY(!o.snapToEdges);   // the default: the shipped model's labels
        o.snapToEdges = true;
        pseudoLabels(found, step, o, l1, s1);
        QCOMPARE(l1.size(0), int64_t(2));
        QVERIFY(maxDiff(s1, torch::tensor({0.9f, 0.8f})) == 0.0);
        QVERIFY2(std::abs(l1[0][0].item<float>() - 48.0f) < 0.15f && std::abs(l1[0][2].item<float>() - 48.0f) < 0.15f,
                 qPrintable(QString("%1 %2").arg(l1[0][0].item<float>()).arg(l1[0][2].item<float>())));
        QVERIFY(maxDiff(l1[1], torch::tensor({20.0f, 4.0f, 20.0f, 60.0f})) == 0.0);
        o.snapToEdges = false;
        pseudoLabels(found, step, o, l0, s0);
        QVERIFY(maxDiff(l0, torch::tensor({{49.8f, 4.0f, 47.0f, 60.0f}, {20.0f, 4.0f, 20.0f, 60.0f}})) == 0.0);
        QVERIFY(contains(smallOptions().toJson(), {"\"snap_to_edges\":false"}));
        o.snapToEdges = true;
        QVERIFY(contains(o.toJson(), {"\"snap_to_edges\":true"}));
    }

    void datasetSpec() {
        QTemporaryDir dir;
        const std::string d = dir.path().toStdString();
        saveImagePNG(d + "/a.png", photo(64, 48, 0));
        writeText(d + "/list.txt", "a.png\n");
        // The spec labels with the checkpoint the app sets (resources/mlsd_tiny.h5 in glimpse).
        setMlsdLabelCheckpoint("");
        QVERIFY(contains(errorOf([&] { openLineDataset("mlsd:" + d + "/list.txt"); }), {"mlsd:", "no M-LSD model"}));
        QVERIFY(contains(errorOf([&] { openLineDataset("mlsd:"); }), {"mlsd:LIST"}));
        auto model = smallModel();
        Checkpoint ck = checkpointFromModule(*model->net, "mlsd", model->config.toJsonString());
        saveCheckpoint(d + "/small_mlsd.h5", ck);
        setMlsdLabelCheckpoint(d + "/small_mlsd.h5");
        auto ds = openLineDataset("mlsd:" + d + "/list.txt");
        QCOMPARE(ds->size(), int64_t(1));
        QVERIFY(contains(ds->describe(), {"M-LSD pseudo-lines"}));
        QVERIFY(std::filesystem::exists(d + "/list.txt.mlsd.h5"));
        // A folder: its cache lies inside it.
        auto folder = openLineDataset("mlsd:" + d);
        QCOMPARE(folder->size(), int64_t(1));
        QVERIFY(std::filesystem::exists(d + "/mlsd_labels.h5"));
        // mlsd-snapped: the same photos, labels snapped (another labeller: the cache is rebuilt).
        auto snappedSet = openLineDataset("mlsd-snapped:" + d + "/list.txt");
        QCOMPARE(snappedSet->size(), int64_t(1));
        // The run log's data_description names the option (it read "mlsd:" before).
        QVERIFY(contains(snappedSet->describe(), {"mlsd-snapped:" + d + "/list.txt", "snapped to edges"}));
        QVERIFY(!contains(ds->describe(), {"snapped"}));
        QVERIFY(contains(h5::File::open(d + "/list.txt.mlsd.h5").attrString("labeller"), {"\"snap_to_edges\":true"}));
        openLineDataset("mlsd:" + d + "/list.txt");
        QVERIFY(contains(h5::File::open(d + "/list.txt.mlsd.h5").attrString("labeller"), {"\"snap_to_edges\":false"}));
        QVERIFY(contains(errorOf([&] { openLineDataset("mlsd-snapped:"); }), {"mlsd-snapped:LIST"}));
        QVERIFY(contains(errorOf([&] { openLineDataset("mlsd:" + d + "/nope.txt"); }), {"nope.txt"}));
        setMlsdLabelCheckpoint("");
    }
};

QTEST_GUILESS_MAIN(TestMlsdLines)
#include "test_mlsd_lines.moc"
