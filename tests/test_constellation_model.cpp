// ConstellationNet model: the mini-batch soft k-means step against a hand-computed step, the
// cosine distance map, the sine positional encoding and the cell relation attention against
// direct computations, backbone shapes and names, few-shot logits, checkpoints and bad input.
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>

#include <torch/torch.h>

#include "core/error.h"
#include "core/io/checkpoint.h"
#include "core/models/constellation/config.h"
#include "core/models/constellation/model.h"
#include "core/models/constellation/trace.h"
#include "core/data/classification.h"
#include "tests/support.h"

using namespace glimpse;
using namespace glimpse::constellation;
using testing::contains;
using testing::errorOf;
using testing::maxDiff;

namespace {

ConstellationConfig smallConv4(bool constellation = true, bool multi = false) {
    ConstellationConfig c;
    c.constellation = constellation;
    c.multiBranch = multi;
    c.channels = {8, 8, 8, 8};
    c.clusters = 16;
    c.heads = 4;
    c.dropout = 0.0;
    c.numClasses = 5;
    c.imageSize = 32;
    return c;
}

// Images whose top-left quadrant is white for class 1 and black for class 0.
class QuadrantDataset : public data::ClassificationDataset {
public:
    QuadrantDataset() { classNames_ = {"dark", "bright"}; }
    int64_t size() const override { return 6; }
    data::ClassSample get(int64_t i) const override {
        cv::Mat m = testing::randomImage(32, 32, uint64_t(i));
        m(cv::Rect(0, 0, 16, 16)).setTo(cv::Scalar::all(i % 2 ? 255 : 0));
        return {m, i % 2};
    }
    std::string describe() const override { return "quadrants"; }
};

} // namespace

class TestConstellationModel : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void initTestCase() { torch::manual_seed(0); }

    // One soft k-means step (eqs. 4.4-4.6) on three 2-D cells and two centers, computed with
    // plain doubles.
    void softKMeansStepMatchesHandComputation() {
        CellClustering cc(2, 2, /*beta*/ 2.0, /*lambda*/ 1.0);
        torch::NoGradGuard ng;
        cc->V_buffer.copy_(torch::tensor({{1.0f, 0.0f}, {0.6f, 0.8f}}));
        cc->V_count_buffer.fill_(1.0);
        const double U[3][2] = {{1, 0}, {0, 1}, {0.6, -0.8}};
        const double V[2][2] = {{1, 0}, {0.6, 0.8}};
        double m[3][2], delta[2] = {0, 0}, vb[2][2] = {{0, 0}, {0, 0}};
        for (int i = 0; i < 3; ++i) {
            double e[2];
            for (int k = 0; k < 2; ++k) e[k] = std::exp(2.0 * (U[i][0] * V[k][0] + U[i][1] * V[k][1]));
            for (int k = 0; k < 2; ++k) {
                m[i][k] = e[k] / (e[0] + e[1]);
                delta[k] += m[i][k];
                vb[k][0] += m[i][k] * U[i][0];
                vb[k][1] += m[i][k] * U[i][1];
            }
        }
        double expectV[2][2], expectCount[2];
        for (int k = 0; k < 2; ++k) {
            expectCount[k] = 1.0 + delta[k];
            const double eta = delta[k] / expectCount[k];
            for (int c = 0; c < 2; ++c) expectV[k][c] = (1 - eta) * V[k][c] + eta * vb[k][c] / delta[k];
        }
        auto u = torch::tensor({{1.0f, 0.0f}, {0.0f, 1.0f}, {0.6f, -0.8f}});
        cc->updateCenters(u);
        for (int k = 0; k < 2; ++k) {
            QVERIFY(std::abs(cc->V_count_buffer[k].item<double>() - expectCount[k]) < 1e-6);
            for (int c = 0; c < 2; ++c) QVERIFY(std::abs(cc->V_buffer[k][c].item<double>() - expectV[k][c]) < 1e-5);
        }
        // A center no cell reaches keeps its place (eta = 0) and stays finite.
        CellClustering far(2, 3, 100.0, 1.0);
        far->V_buffer.copy_(torch::tensor({{1.0f, 0.0f}, {0.0f, 1.0f}, {-1.0f, 0.0f}}));
        far->updateCenters(torch::tensor({{1.0f, 0.0f}, {0.99f, 0.141f}}));
        QVERIFY(torch::isfinite(far->V_buffer).all().item<bool>());
        QVERIFY(maxDiff(far->V_buffer[2], torch::tensor({-1.0f, 0.0f})) < 1e-6);
    }

    // The map passed on is the cosine similarity of every cell to every (normalized) center; in
    // eval mode the centers stay; in training mode they move.
    void distanceMapIsCosineSimilarity() {
        CellClustering cc(3, 4, 100.0, 1.0);
        auto x = torch::randn({2, 3, 5, 6});
        cc->eval();
        auto before = cc->V_buffer.clone();
        auto s = cc->forward(x);
        QCOMPARE(s.sizes().vec(), (std::vector<int64_t>{2, 4, 5, 6}));
        QVERIFY(torch::equal(before, cc->V_buffer));
        for (int b : {0, 1})
            for (int k : {0, 3}) {
                auto cell = x.index({b, torch::indexing::Slice(), 2, 4});
                auto v = cc->V_buffer[k];
                const double cosv = (cell.dot(v) / (cell.norm() * v.norm())).item<double>();
                QVERIFY(std::abs(s[b][k][2][4].item<double>() - cosv) < 1e-5);
            }
        cc->train();
        cc->forward(x);
        QVERIFY(!torch::equal(before, cc->V_buffer));
        // Counts start at one per center and gain one per cell (its soft assignments sum to 1).
        // The assignments are float32 (60 of them, summed per center), so the sum is 64 to a
        // float32 tolerance, not to 1e-6: the rounding differs between CPUs' kernels.
        QVERIFY(std::abs(cc->V_count_buffer.sum().item<double>() - (4.0 + 2 * 30)) < 1e-4);
        QVERIFY(!cc->V_buffer.requires_grad());
    }

    void sinePositionEncodingFormula() {
        const int64_t F = 8;
        auto pe = sinePositionEncoding(3, 4, F);
        QCOMPARE(pe.sizes().vec(), (std::vector<int64_t>{3, 4, 2 * F}));
        for (int y = 0; y < 3; ++y)
            for (int x = 0; x < 4; ++x)
                for (int i = 0; i < F; ++i) {
                    const double t = std::pow(10000.0, 2.0 * (i / 2) / double(F));
                    const double ey = i % 2 == 0 ? std::sin((y + 1) / t) : std::cos((y + 1) / t);
                    const double ex = i % 2 == 0 ? std::sin((x + 1) / t) : std::cos((x + 1) / t);
                    QVERIFY(std::abs(pe[y][x][i].item<double>() - ey) < 1e-5);
                    QVERIFY(std::abs(pe[y][x][F + i].item<double>() - ex) < 1e-5);
                }
    }

    // Attention weights of head h = softmax((S+P) Wq_h . (S+P) Wk_h / sqrt(d)) computed directly.
    void cellRelationAttentionMatchesDirect() {
        const int64_t K = 8, H = 3, W = 2, heads = 2, d = K / heads;
        CellRelation rel(K, heads, 0.0);
        rel->eval();
        auto s = torch::randn({1, K, H, W});
        torch::Tensor att;
        auto out = rel->forward(s, &att);
        QCOMPARE(out.sizes().vec(), s.sizes().vec());
        QCOMPARE(att.sizes().vec(), (std::vector<int64_t>{1, heads, H * W, H * W}));
        QVERIFY(maxDiff(att.sum(-1), torch::ones({1, heads, H * W})) < 1e-5);
        auto x = s[0].permute({1, 2, 0}).reshape({H * W, K}) + sinePositionEncoding(H, W, K / 2).reshape({H * W, K});
        auto& mh = rel->mhatt;
        for (int64_t h = 0; h < heads; ++h) {
            auto wq = mh->linear_q->weight.narrow(0, h * d, d), bq = mh->linear_q->bias.narrow(0, h * d, d);
            auto wk = mh->linear_k->weight.narrow(0, h * d, d), bk = mh->linear_k->bias.narrow(0, h * d, d);
            auto q = x.mm(wq.t()) + bq, k = x.mm(wk.t()) + bk;
            auto expect = torch::softmax(q.mm(k.t()) / std::sqrt(double(d)), -1);
            QVERIFY(maxDiff(att[0][h], expect.detach()) < 1e-5);
        }
        // Post-norm: every output cell is layer-normalized (zero mean over K with unit gain).
        auto cells = out[0].permute({1, 2, 0}).reshape({H * W, K});
        QVERIFY(cells.mean(-1).abs().max().item<double>() < 1e-5);
    }

    void conv4ShapesRecordsAndNames() {
        ConstellationModel m(smallConv4());
        m.eval();
        auto out = m.forward(torch::randn({2, 3, 32, 32}), {true, -1});
        QCOMPARE(out.pooled.size(), size_t(1));
        QCOMPARE(out.pooled[0].sizes().vec(), (std::vector<int64_t>{2, 8}));
        QCOMPARE(out.maps[0].sizes().vec(), (std::vector<int64_t>{2, 8, 2, 2}));
        QCOMPARE(out.logits.sizes().vec(), (std::vector<int64_t>{2, 5}));
        QCOMPARE(out.records.size(), size_t(4));
        const int64_t sides[4] = {32, 16, 8, 4};
        for (size_t i = 0; i < 4; ++i) {
            QCOMPARE(out.records[i].similarity.sizes().vec(), (std::vector<int64_t>{2, 16, sides[i], sides[i]}));
            QCOMPARE(out.records[i].attention.defined(), i >= 2);
            QCOMPARE(out.records[i].layer, int64_t(i + 1));
        }
        QCOMPARE(out.records[2].attention.sizes().vec(), (std::vector<int64_t>{2, 4, 64, 64}));
        auto params = m.named_parameters(true);
        auto buffers = m.named_buffers(true);
        for (const char* n : {"encoder.branch1.0.conv.weight", "encoder.branch1.0.merge.weight",
                              "encoder.branch1.2.transformer.layers.0.mhatt.linear_q.weight",
                              "encoder.branch1.3.transformer.layers.0.norm2.bias", "encoder.branch1.3.bn.weight",
                              "classifier.linear.weight", "temp"})
            QVERIFY2(params.contains(n), n);
        QVERIFY(buffers.contains("encoder.branch1.1.feat_cluster.V_buffer"));
        QVERIFY(!params.contains("encoder.branch1.1.transformer.layers.0.norm1.weight"));
        QCOMPARE(m.constellationModules().size(), size_t(4));

        ConstellationModel base(smallConv4(false));
        for (const auto& p : base.named_buffers(true)) QVERIFY(p.key().find("feat_cluster") == std::string::npos);
        QVERIFY(base.numParameters() < m.numParameters());
        QVERIFY(base.constellationModules().empty());
        QVERIFY(base.forward(torch::randn({1, 3, 32, 32}), {true, -1}).records.empty());
    }

    void multiBranchAndResNet12() {
        ConstellationModel y(smallConv4(true, true));
        y.eval();
        auto out = y.forward(torch::randn({3, 3, 32, 32}), {true, -1});
        QCOMPARE(out.branches, (std::vector<int>{1, 2}));
        QCOMPARE(out.records.size(), size_t(4));   // stem 2 + branch 1 2; branch 2 is plain
        QCOMPARE(y.fewShotFeatures(out).size(), size_t(4));
        QCOMPARE(y.testWeights(), (std::vector<double>{4, 3, 2, 1}));
        auto only2 = y.forward(torch::randn({3, 3, 32, 32}), {false, 2});
        QCOMPARE(only2.branches, (std::vector<int>{2}));
        QVERIFY(!only2.logits.defined());

        ConstellationConfig r = smallConv4();
        r.backbone = "resnet12";
        r.channels = {8, 8, 16, 16};
        r.dropBlock = 0.1;
        ConstellationModel res(r);
        QCOMPARE(res.constellationModules().size(), size_t(4));   // layers 1, 7, 8, 9
        QCOMPARE(res.constellationModules()[1].name, std::string("branch1.2.mergeblock1"));
        res.train();
        auto ro = res.forward(torch::randn({2, 3, 32, 32}), {true, -1});
        QCOMPARE(ro.maps[0].sizes().vec(), (std::vector<int64_t>{2, 16, 2, 2}));
        QCOMPARE(ro.records[0].similarity.sizes().vec(), (std::vector<int64_t>{2, 16, 32, 32}));
        QVERIFY(!ro.records[0].attention.defined());
        QVERIFY(ro.records[1].attention.defined());
        QVERIFY(res.named_parameters(true).contains("encoder.branch1.0.downsample.0.weight"));
    }

    // Gradients reach the conv through the distance map; the centers get none.
    void clusteringIsDifferentiableInTheFeatures() {
        ConstellationModel m(smallConv4());
        m.train();
        auto out = m.forward(torch::randn({4, 3, 32, 32}));
        torch::nn::functional::cross_entropy(out.logits, torch::tensor({0, 1, 2, 3})).backward();
        auto g = m.named_parameters(true)["encoder.branch1.0.conv.weight"].grad();
        QVERIFY(g.defined() && g.abs().sum().item<double>() > 0);
        QVERIFY(m.named_parameters(true)["encoder.branch1.2.transformer.layers.0.mhatt.linear_q.weight"]
                    .grad()
                    .abs()
                    .sum()
                    .item<double>() > 0);
    }

    void prototypeLogits() {
        auto support = torch::tensor({{1.0f, 0.0f}, {3.0f, 0.0f}, {0.0f, 2.0f}, {0.0f, 4.0f}});
        auto query = torch::tensor({{1.0f, 1.0f}, {0.0f, -1.0f}});
        auto l = cosinePrototypeLogits(support, query, 2, 2);
        const double r = 1 / std::sqrt(2.0);
        QVERIFY(maxDiff(l, torch::tensor({{r, r}, {0.0, -1.0}})) < 1e-6);
        QVERIFY(contains(errorOf([&] { cosinePrototypeLogits(support, query, 3, 2); }), {"4 support", "3 ways"}));
        // Queries that are the support images themselves are each classified as their own way.
        ConstellationModel m(smallConv4(true, true));
        m.eval();
        torch::NoGradGuard ng;
        auto imgs = torch::randn({5, 3, 32, 32});
        auto logits = m.fewShotLogits(imgs, imgs, 5, 1);
        QCOMPARE(logits.sizes().vec(), (std::vector<int64_t>{5, 5}));
        QVERIFY(torch::equal(logits.argmax(1), torch::arange(5)));
        QVERIFY(std::abs(logits[2][2].item<double>() - 10.0) < 1e-4);   // 4 + 3 + 2 + 1 at cos = 1
    }

    void checkpointRoundTripAndRefusals() {
        QTemporaryDir dir;
        const std::string path = dir.filePath("c.h5").toStdString();
        ConstellationConfig c = smallConv4();
        c.classNames = {"a", "b", "c", "d", "e"};
        ConstellationModel m(c, 3);
        m.train();
        m.forward(torch::randn({2, 3, 32, 32}));   // moves the centers
        m.eval();
        saveConstellation(m, path);
        auto back = loadConstellation(path);
        QCOMPARE(back->config().className(4), std::string("e"));
        auto x = torch::randn({2, 3, 32, 32});
        torch::NoGradGuard ng;
        QVERIFY(maxDiff(m.forward(x).logits, back->forward(x).logits) < 1e-6);
        QVERIFY(torch::equal(m.clustering("branch1.0")->V_count_buffer, back->clustering("branch1.0")->V_count_buffer));

        // Another cluster count than the tensors hold: refused naming the file and a tensor.
        Checkpoint ck = loadCheckpoint(path);
        auto j = nlohmann::json::parse(ck.configJson);
        j["clusters"] = 8;
        ck.configJson = j.dump();
        const std::string bad = dir.filePath("bad.h5").toStdString();
        saveCheckpoint(bad, ck);
        const std::string e = errorOf([&] { loadConstellation(bad); });
        QVERIFY2(contains(e, {"bad.h5", "V_buffer"}), e.c_str());
        ck.family = "coat";
        saveCheckpoint(bad, ck);
        QVERIFY(contains(errorOf([&] { loadConstellation(bad); }), {"bad.h5", "coat", "not a ConstellationNet"}));
    }

    void traceRoundTripAndViews() {
        ConstellationConfig c = smallConv4();
        ConstellationModel m(c, 1);
        m.train();
        auto img = testing::randomImage(40, 60, 7);
        auto tr = ConstellationTrace::capture(m, img);
        QVERIFY(m.is_training());   // mode restored
        QCOMPARE(tr.numModules(), 4);
        QCOMPARE(tr.clusters(), int64_t(16));
        QCOMPARE(tr.numHeads(), 4);
        QCOMPARE(tr.originalSize(), (std::pair<int64_t, int64_t>(40, 60)));
        QCOMPARE(tr.module(2).h, int64_t(8));
        // The trace holds exactly what the model computes in eval mode.
        m.eval();
        torch::NoGradGuard ng;
        auto out = m.forward(m.preprocess(img).tensor.unsqueeze(0), {true, -1});
        QVERIFY(maxDiff(tr.similarity(1), out.records[1].similarity[0]) < 1e-6);
        auto top = tr.topClusters(2, 3, 5);
        QCOMPARE(top.size(), size_t(3));
        QCOMPARE(top[0].cluster, tr.assignment(2)[3][5].item<int64_t>());
        QVERIFY(top[0].similarity >= top[1].similarity && top[1].similarity >= top[2].similarity);
        QVERIFY(std::abs(top[0].similarity - tr.similarity(2)[top[0].cluster][3][5].item<float>()) < 1e-6);
        auto rel = tr.relation(3, -1, 1, 2);
        QCOMPARE(rel.sizes().vec(), (std::vector<int64_t>{4, 4}));
        QVERIFY(std::abs(rel.sum().item<double>() - 1.0) < 1e-5);
        QVERIFY(maxDiff(tr.relation(3, 1, 1, 2).flatten(), out.records[3].attention[0][1][1 * 4 + 2]) < 1e-6);
        QVERIFY(contains(errorOf([&] { tr.relation(0, -1, 0, 0); }), {"no cell relation"}));
        QVERIFY(contains(errorOf([&] { tr.topClusters(0, 40, 0); }), {"outside"}));

        QTemporaryDir dir;
        const std::string path = dir.filePath("t.h5").toStdString();
        tr.save(path);
        auto back = ConstellationTrace::load(path);
        QVERIFY(torch::equal(back.similarity(3), tr.similarity(3)));
        QCOMPARE(back.top5().size(), size_t(5));
        Trace foreign("coat");
        foreign.save(path);
        QVERIFY(contains(errorOf([&] { ConstellationTrace::load(path); }), {"t.h5", "coat"}));

        // Stable, distinct palette.
        QCOMPARE(clusterColour(5), clusterColour(5));
        for (int a = 0; a < 16; ++a)
            for (int b = a + 1; b < 16; ++b) QVERIFY(clusterColour(a) != clusterColour(b));
    }

    // The gallery's patches are the cells most similar to the cluster, best first, and their
    // scores are the similarities the model computes for those cells.
    void clusterGalleryPicksMostSimilarCells() {
        ConstellationModel m(smallConv4(), 2);
        m.eval();
        QuadrantDataset ds;
        auto g = clusterGallery(m, ds, "branch1.1", 3, 4, 0);
        QCOMPARE(g.size(), size_t(4));
        torch::NoGradGuard ng;
        for (size_t i = 0; i < g.size(); ++i) {
            if (i) QVERIFY(g[i - 1].similarity >= g[i].similarity);
            auto out = m.forward(m.preprocess(ds.get(g[i].imageIndex).image).tensor.unsqueeze(0), {true, -1});
            auto sim = out.records[1].similarity[0][3];
            QVERIFY(std::abs(sim.max().item<float>() - g[i].similarity) < 1e-5);
            QVERIFY(std::abs(sim[g[i].y][g[i].x].item<float>() - g[i].similarity) < 1e-5);
            QVERIFY(!g[i].patch.empty() && g[i].patch.type() == CV_8UC3);
        }
        QVERIFY(contains(errorOf([&] { clusterGallery(m, ds, "nope", 0, 3, 0); }), {"nope"}));
        QVERIFY(contains(errorOf([&] { clusterGallery(m, ds, "branch1.0", 99, 3, 0); }), {"cluster 99"}));
    }

    void configErrors() {
        auto err = [](const std::string& text) {
            return errorOf([&] { ConstellationConfig::fromJsonString(text, "cfg.json"); });
        };
        QVERIFY(contains(err(R"({"backbone": "vgg"})"), {"cfg.json", "backbone"}));
        QVERIFY(contains(err(R"({"clusters": 30, "heads": 8})"), {"cfg.json", "heads"}));
        QVERIFY(contains(err(R"({"relation_layers": [2], "cluster_layers": [1]})"), {"relation_layers", "layer 2"}));
        QVERIFY(contains(err(R"({"cluster_layers": [13]})"), {"cluster_layers", "1..4"}));
        QVERIFY(contains(err(R"({"clusterz": 3})"), {"cfg.json", "clusterz"}));
        auto round = ConstellationConfig::fromJson(smallConv4(true, true).toJson());
        QCOMPARE(round.toJson(), smallConv4(true, true).toJson());
        ConstellationModel m(smallConv4());
        QVERIFY(contains(errorOf([&] { m.preprocess(cv::Mat()); }), {"empty"}));
        QVERIFY(contains(errorOf([&] { m.forward(torch::randn({1, 3, 8, 8})); }), {"16x16"}));
        auto gray = m.preprocess(cv::Mat(50, 70, CV_8UC1, cv::Scalar(128)));
        QCOMPARE(gray.tensor.sizes().vec(), (std::vector<int64_t>{3, 32, 32}));
        QVERIFY(std::abs(gray.tensor[1][5][5].item<double>() - (128 / 255.0 - 0.5) / 0.25) < 1e-5);
    }
};

QTEST_GUILESS_MAIN(TestConstellationModel)
#include "test_constellation_model.moc"
