#pragma once
// M-LSD configuration (Gu et al., "Towards Light-weight and Real-time Line Segment Detection",
// AAAI 2022; facts in docs/models.md "M-LSD"). Stored as the /meta config of an M-LSD
// checkpoint (family "mlsd", written by installer/convert_mlsd.py).
//
// JSON form (every key optional; defaults are the reference demo's, pred_lines()):
//   {
//     "variant": "tiny",            // the only one implemented (M-LSD large: docs/decisions.md)
//     "input_size": 512,            // the network input side (square; a multiple of 32)
//     "top_k": 200,                 // centre candidates kept after the max-pool suppression
//     "nms_kernel": 3,              // side of that max pool (odd)
//     "score_threshold": 0.10,      // keep a line when its centre score is above this
//     "length_threshold": 20.0      // ... and its length in centre-map pixels (input / 2) is
//   }                               //     above this (20 = 40 px of a 512 input)
// Unknown keys are an error (they are usually typos).
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace glimpse::mlsd {

struct MlsdConfig {
    std::string variant = "tiny";
    int64_t inputSize = 512;
    int64_t topK = 200;
    int64_t nmsKernel = 3;
    double scoreThreshold = 0.10;
    double lengthThreshold = 20.0;

    // Throws glimpse::Error naming the field and the problem.
    void validate() const;

    nlohmann::json toJson() const;
    std::string toJsonString() const { return toJson().dump(); }
    // `source` names where the JSON came from (a file, "checkpoint X") for error messages.
    static MlsdConfig fromJson(const nlohmann::json& j, const std::string& source = "config");
    static MlsdConfig fromJsonString(const std::string& text, const std::string& source = "config");

    // Side of the centre and displacement maps: input_size / 2.
    int64_t mapSize() const { return inputSize / 2; }
};

} // namespace glimpse::mlsd
