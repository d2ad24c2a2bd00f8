# Evaluation (core/eval): line metrics on hand-made cases; LETR per-layer evaluation with a tiny model.
glimpse_add_test(test_line_metrics SOURCES test_line_metrics.cpp LIBS glimpse_core TIMEOUT 120 LABELS eval)
glimpse_add_test(test_letr_eval SOURCES test_letr_eval.cpp LIBS glimpse_core TIMEOUT 300 LABELS eval letr)
