// Precompiled header for LibTorch users (core, and through glimpse_pch the Qt-side targets).
#pragma once
#include <torch/torch.h>
#include <opencv2/core.hpp>
#include <nlohmann/json.hpp>
#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>
