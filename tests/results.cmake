# Results files (issue 53, core/results): writer / reader round trips, the per-sample records
# against the summaries they came with, partial files, bad input and moved sources.
glimpse_add_test(test_results SOURCES test_results.cpp LIBS glimpse_core TIMEOUT 120 LABELS results)
# The evals' --out end to end (tiny random LETR, CoaT and ConstellationNet checkpoints, small data):
# the per-sample records add up to the printed tables; glimpse info and bench results.
glimpse_add_test(test_results_cli SOURCES test_results_cli.cpp LIBS glimpse_core TIMEOUT 300 LABELS results)
add_dependencies(test_results_cli glimpse)
target_compile_definitions(test_results_cli PRIVATE GLIMPSE_EXE="$<TARGET_FILE:glimpse>")
