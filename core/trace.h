#pragma once
// Trace: what one model run on one frame produced, as named tensors plus metadata, so that
// views can be answered later without the model ("capture, then inspect": docs/formats.md,
// "Trace").
// Model families wrap a Trace with typed accessors (e.g. core/models/letr/trace.h).
//
// HDF5 layout (docs/formats.md):
//   /          attributes: kind = "glimpse.trace", format_version (int)
//   /meta      attributes: family, meta (JSON string)
//   /tensors/<name>   one dataset per tensor; '/' in a name makes sub-groups
#include <map>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>
#include <torch/types.h>

namespace glimpse {

class Trace {
public:
    static constexpr int kFormatVersion = 1;

    Trace() = default;
    explicit Trace(std::string family) : family_(std::move(family)) {}

    const std::string& family() const { return family_; }
    nlohmann::json& meta() { return meta_; }
    const nlohmann::json& meta() const { return meta_; }

    void set(const std::string& name, const torch::Tensor& t);   // stores a contiguous CPU copy
    bool has(const std::string& name) const;
    // Throws Error("trace has no tensor 'name'") when missing.
    const torch::Tensor& get(const std::string& name) const;
    // Like get(), and also checks the number of dims and (where >= 0) each size.
    const torch::Tensor& get(const std::string& name, const std::vector<int64_t>& shape) const;
    std::vector<std::string> names() const;
    int64_t bytes() const;                         // sum of tensor sizes

    void save(const std::string& path) const;      // atomic
    static Trace load(const std::string& path);    // clear Error on foreign/truncated files

private:
    std::string family_;
    nlohmann::json meta_ = nlohmann::json::object();
    std::map<std::string, torch::Tensor> tensors_;
};

} // namespace glimpse
