# Evaluation (core/eval): line metrics on hand-made cases.
glimpse_add_test(test_line_metrics SOURCES test_line_metrics.cpp LIBS glimpse_core TIMEOUT 120 LABELS eval)
