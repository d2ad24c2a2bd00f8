# Few-shot data (core/data/fewshot.h): procedural family, split specs, class subsets, episodes.
glimpse_add_test(test_fewshot_data SOURCES test_fewshot_data.cpp LIBS glimpse_core TIMEOUT 300 LABELS constellation)
# The composition family (core/data/composition.h): colour carries no class information.
glimpse_add_test(test_fewshot_composition SOURCES test_fewshot_composition.cpp LIBS glimpse_core TIMEOUT 120 LABELS constellation)
