# Regression tests for what the fuzzers (fuzz/, docs/fuzzing.md) found: each crashing input,
# fed to the reader that crashed, must now give a clear glimpse::Error.
glimpse_add_test(test_fuzz_regressions SOURCES test_fuzz_regressions.cpp LIBS glimpse_core TIMEOUT 120 LABELS core io fuzz)
