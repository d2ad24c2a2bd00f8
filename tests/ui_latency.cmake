# UI-thread event-loop latency (app/ui_latency*): the probe and the LETR / run-follow / scrub
# scenarios of `glimpse bench ui` in the real main window; under Xvfb (Vulkan viewport).
glimpse_add_test(test_ui_latency SOURCES test_ui_latency.cpp LIBS glimpse_app XVFB TIMEOUT 300 LABELS gui)
