# Renderer tests: offscreen Vulkan (lavapipe on machines without a GPU), pixels checked exactly.
glimpse_add_test(test_renderer SOURCES test_renderer.cpp LIBS glimpse_renderer TIMEOUT 120 LABELS renderer)
