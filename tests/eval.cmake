# Evaluation (core/eval): line metrics on hand-made cases; LETR per-layer evaluation with a tiny model.
glimpse_add_test(test_line_metrics SOURCES test_line_metrics.cpp LIBS glimpse_core TIMEOUT 120 LABELS eval)
glimpse_add_test(test_letr_eval SOURCES test_letr_eval.cpp LIBS glimpse_core TIMEOUT 300 LABELS eval letr)
# `glimpse eval letr` end to end (tiny random checkpoint, procedural data).
glimpse_add_test(test_cli_eval SOURCES test_cli_eval.cpp LIBS glimpse_core TIMEOUT 300 LABELS eval letr)
add_dependencies(test_cli_eval glimpse)
target_compile_definitions(test_cli_eval PRIVATE GLIMPSE_EXE="$<TARGET_FILE:glimpse>")
