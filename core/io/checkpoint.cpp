#include "core/io/checkpoint.h"

#include <torch/torch.h>

#include "core/error.h"
#include "core/h5/h5.h"

namespace glimpse {

namespace {
constexpr const char* kKind = "glimpse.checkpoint";
constexpr int kFormatVersion = 1;

std::string shapeOf(const torch::Tensor& t) {
    return h5::shapeString(std::vector<int64_t>(t.sizes().begin(), t.sizes().end()));
}

std::map<std::string, torch::Tensor> moduleTensors(const torch::nn::Module& module) {
    std::map<std::string, torch::Tensor> out;
    for (const auto& p : module.named_parameters(true))
        if (p.value().defined()) out[p.key()] = p.value();
    for (const auto& b : module.named_buffers(true))
        if (b.value().defined()) out[b.key()] = b.value();
    return out;
}
} // namespace

Checkpoint loadCheckpoint(const std::string& path) {
    h5::File f = h5::openGlimpse(path, kKind, kFormatVersion);
    if (!f.hasGroup("meta")) throw Error(path + ": checkpoint has no /meta group");
    if (!f.hasGroup("params")) throw Error(path + ": checkpoint has no /params group");
    h5::Group meta = f.group("meta");
    Checkpoint c;
    c.family = meta.attrString("family");
    c.configJson = meta.attrString("config");
    c.formatVersion = int(f.attrInt("format_version"));
    h5::Group params = f.group("params");
    for (const auto& name : params.children()) {
        if (!params.hasDataset(name))
            throw Error(path + ": '/params/" + name + "' is not a dataset (parameters are datasets)");
        c.tensors[name] = params.dataset(name).read();
    }
    return c;
}

Checkpoint loadModelCheckpoint(const std::string& path, const std::string& converter, const std::string& convertedName) {
    const auto dot = path.rfind('.');
    const std::string ext = dot == std::string::npos ? "" : path.substr(dot);
    if (ext == ".pth" || ext == ".pt")
        throw Error(path + ": a PyTorch checkpoint; convert it first: /usr/bin/python3 installer/" + converter + " " + path +
                    " --out " + convertedName);
    return loadCheckpoint(path);
}

void saveCheckpoint(const std::string& path, const Checkpoint& ckpt) {
    for (const auto& [name, t] : ckpt.tensors) {
        if (name.empty() || name == "." || name.find('/') != std::string::npos)
            throw Error(path + ": invalid tensor name '" + name + "' (must be non-empty, without '/')");
        if (!t.defined()) throw Error(path + ": tensor '" + name + "' is undefined");
    }
    h5::writeAtomically(path, kKind, kFormatVersion, [&](h5::File& f) {
        h5::Group meta = f.createGroup("meta");
        meta.setAttr("family", ckpt.family);
        meta.setAttr("config", ckpt.configJson);
        meta.setAttr("format_version", int64_t(kFormatVersion));
        h5::Group params = f.createGroup("params");
        // Every weight tensor carries a Fletcher-32 checksum: a flipped bit fails the load,
        // naming the tensor, instead of running a corrupted model.
        h5::WriteOptions checked;
        checked.checksum = true;
        for (const auto& [name, t] : ckpt.tensors) params.writeTensor(name, t, checked);
    });
}

void applyCheckpoint(const Checkpoint& ckpt, torch::nn::Module& module, const std::string& family,
                     const std::string& path) {
    if (ckpt.family != family)
        throw Error(path + " is a checkpoint of a '" + ckpt.family + "' model, expected '" + family + "'");
    auto targets = moduleTensors(module);
    std::vector<std::string> problems;
    for (const auto& [name, dst] : targets) {
        auto it = ckpt.tensors.find(name);
        if (it == ckpt.tensors.end()) {
            problems.push_back("missing " + name + " " + shapeOf(dst));
            continue;
        }
        const torch::Tensor& src = it->second;
        if (!src.sizes().equals(dst.sizes()))
            problems.push_back("wrong shape " + name + ": model has " + shapeOf(dst) + ", checkpoint has " +
                               shapeOf(src));
        if (src.scalar_type() != dst.scalar_type())
            problems.push_back("wrong dtype " + name + ": model has " + h5::dtypeName(dst.scalar_type()) +
                               ", checkpoint has " + h5::dtypeName(src.scalar_type()));
    }
    for (const auto& [name, src] : ckpt.tensors)
        if (!targets.count(name)) problems.push_back("unexpected " + name + " " + shapeOf(src));
    if (!problems.empty()) {
        std::string msg = path + " does not fit the " + family + " model (" + std::to_string(problems.size()) +
                          (problems.size() == 1 ? " problem" : " problems") + "):";
        for (const auto& p : problems) msg += "\n  " + p;
        throw Error(msg);
    }
    torch::NoGradGuard noGrad;
    for (auto& [name, dst] : targets) dst.copy_(ckpt.tensors.at(name));
}

Checkpoint checkpointFromModule(const torch::nn::Module& module, const std::string& family,
                                const std::string& configJson) {
    Checkpoint c;
    c.family = family;
    c.configJson = configJson;
    for (const auto& [name, t] : moduleTensors(module))
        c.tensors[name] = t.detach().to(torch::kCPU).contiguous().clone();
    return c;
}

} // namespace glimpse
