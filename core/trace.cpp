#include "core/trace.h"

#include <torch/torch.h>

#include "core/error.h"
#include "core/h5/h5.h"
#include "core/h5/walk.h"

namespace glimpse {

namespace {
constexpr const char* kKind = "glimpse.trace";

void checkName(const std::string& name) {
    if (!h5::isValidRelativePath(name))
        throw Error("invalid trace tensor name '" + name +
                    "' (non-empty parts separated by single '/', no '.' part)");
}

void readTensors(const h5::Group& g, const std::string& prefix, std::map<std::string, torch::Tensor>& out,
                 h5::WalkGuard& walk) {
    const h5::WalkGuard::Scope in(walk, g);
    for (const auto& child : g.children()) {
        if (g.hasGroup(child)) readTensors(g.group(child), prefix + child + "/", out, walk);
        else out[prefix + child] = g.dataset(child).read();
    }
}
} // namespace

void Trace::set(const std::string& name, const torch::Tensor& t) {
    checkName(name);
    if (!t.defined()) throw Error("trace tensor '" + name + "' is undefined");
    for (const auto& [k, v] : tensors_) {
        if (k.size() > name.size() && k.compare(0, name.size() + 1, name + "/") == 0)
            throw Error("trace tensor name '" + name + "' clashes with '" + k + "' (a name cannot be a prefix group of another)");
        if (name.size() > k.size() && name.compare(0, k.size() + 1, k + "/") == 0)
            throw Error("trace tensor name '" + name + "' clashes with '" + k + "' (a name cannot be a prefix group of another)");
    }
    tensors_[name] = t.detach().to(torch::kCPU).contiguous().clone();
}

bool Trace::has(const std::string& name) const { return tensors_.count(name) > 0; }

const torch::Tensor& Trace::get(const std::string& name) const {
    auto it = tensors_.find(name);
    if (it == tensors_.end()) throw Error("trace has no tensor '" + name + "'");
    return it->second;
}

const torch::Tensor& Trace::get(const std::string& name, const std::vector<int64_t>& shape) const {
    const torch::Tensor& t = get(name);
    bool ok = t.dim() == int64_t(shape.size());
    for (size_t i = 0; ok && i < shape.size(); ++i) ok = shape[i] < 0 || shape[i] == t.size(int64_t(i));
    if (!ok)
        throw Error("trace tensor '" + name + "' has shape " +
                    h5::shapeString(std::vector<int64_t>(t.sizes().begin(), t.sizes().end())) + ", expected " +
                    h5::shapeString(shape));
    return t;
}

std::vector<std::string> Trace::names() const {
    std::vector<std::string> out;
    for (const auto& kv : tensors_) out.push_back(kv.first);
    return out;
}

int64_t Trace::bytes() const {
    int64_t n = 0;
    for (const auto& kv : tensors_) n += int64_t(kv.second.nbytes());
    return n;
}

void Trace::save(const std::string& path) const {
    h5::writeAtomically(path, kKind, kFormatVersion, [&](h5::File& f) {
        h5::Group meta = f.createGroup("meta");
        meta.setAttr("family", family_);
        meta.setAttr("meta", meta_.dump());
        h5::Group tensors = f.createGroup("tensors");
        for (const auto& [name, t] : tensors_) tensors.writeTensor(name, t, {h5::Compression::Auto});
    });
}

Trace Trace::load(const std::string& path) {
    h5::File f = h5::openGlimpse(path, kKind, kFormatVersion);
    if (!f.hasGroup("meta")) throw Error(path + ": trace has no /meta group");
    h5::Group meta = f.group("meta");
    Trace t(meta.attrString("family"));
    try {
        t.meta_ = nlohmann::json::parse(meta.attrString("meta"));
    } catch (const nlohmann::json::exception& e) {
        throw Error(path + ": the 'meta' attribute of /meta is not valid JSON: " + e.what());
    }
    if (f.hasGroup("tensors")) {
        h5::WalkGuard walk;
        readTensors(f.group("tensors"), "", t.tensors_, walk);
    }
    return t;
}

} // namespace glimpse
