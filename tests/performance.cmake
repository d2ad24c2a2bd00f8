# Inference speed paths (docs/performance.md): folded / bfloat16 models against float32 outputs
# within each model's stated bound, on small models.
glimpse_add_test(test_inference_precision SOURCES test_inference_precision.cpp LIBS glimpse_core TIMEOUT 120 LABELS letr rl performance)
